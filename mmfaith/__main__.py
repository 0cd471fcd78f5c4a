import sys

from mmfaith.cli import main

sys.exit(main())
