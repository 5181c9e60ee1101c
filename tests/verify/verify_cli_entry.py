"""`cardbench` with the verify command attached (until cardbench.cli lists it itself)."""
import sys

from cardbench.cli import cli, main
from cardbench.cli.verify_cmd import verify

if "verify" not in cli.commands:
    cli.add_command(verify)
main(sys.argv[1:])
