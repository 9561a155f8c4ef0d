"""Runs at the start of every interpreter a test launches with tests/site on PYTHONPATH
(oom_injection.env_with_site): the ``moescope`` process and each rank it spawns. Test
hooks install here, each only when its environment variable asks for it, so the
package itself carries none of them."""

import oom_injection

oom_injection.install()
