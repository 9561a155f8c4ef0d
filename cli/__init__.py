"""The ``moescope`` command line (``python -m cli`` is the same): one module per command
group. The runner's commands and every ``--url`` command import no package of the server
extra; the commands that read or write a database import it at their module's top and are
loaded only when chosen."""
