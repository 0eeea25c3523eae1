"""Entry point for spark-submit: ``spark-submit goffish/submit.py run cc GRAPH --out OUT``."""
import sys

from goffish.cli import main

if __name__ == "__main__":
    sys.exit(main())
