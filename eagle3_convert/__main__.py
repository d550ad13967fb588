"""`python -m eagle3_convert ...` is the `eagle3-convert` command."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="eagle3-convert")
