"""`python -m mmfaith`: the same as the `mmfaith` command."""
import sys

from mmfaith.cli import main

if __name__ == "__main__":
    sys.exit(main())
