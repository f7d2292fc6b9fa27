"""Entry points: the `wap` command line, the Lambda handler and the other process edges."""
