"""``python -m semcodec.cli``: the same as the ``semcodec`` command."""

from .root import main

if __name__ == "__main__":
    main()
