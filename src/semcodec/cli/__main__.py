"""``python -m semcodec.cli``: the same as the ``semcodec`` command."""

from semcodec.cli.root import main

if __name__ == "__main__":
    main()
