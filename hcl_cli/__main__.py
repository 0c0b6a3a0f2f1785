"""Allow ``python -m hcl_cli`` where the console script is not installed."""

from hcl_cli.cli import main

if __name__ == "__main__":
    main()
