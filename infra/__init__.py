"""AWS resources of wap-lake: data files (IAM policies, queue, EMR, Nessie) and the `provision` package."""
