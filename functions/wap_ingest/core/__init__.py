"""The pure core: models, ports, naming, audits and the WAP pipeline. Standard library only."""
