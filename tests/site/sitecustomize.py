"""Runs at the start of every interpreter a test launches with site_hooks.env_with_site
(the ``moescope`` process and each rank it spawns). Each hook installs only when its
environment variable asks for it, so the package itself carries none of them."""

import cpu_fp8
import import_blocker
import injection
import slow_ceilings

cpu_fp8.install()
import_blocker.install()
injection.install()
slow_ceilings.install()
