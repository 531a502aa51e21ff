"""``python -m textdp`` runs the command line."""

from textdp.cli import main

main()
