"""``python -m cli``: what torchrun and Slurm lines launch on every rank."""

import sys

from cli.main import main

sys.exit(main())
