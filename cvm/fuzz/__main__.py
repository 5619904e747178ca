"""`python -m cvm.fuzz`: the `cvm fuzz` options without the cvm front end."""
import sys

from .cli import main

sys.exit(main())
