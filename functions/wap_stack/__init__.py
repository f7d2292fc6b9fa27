"""The local stack: a moto S3 server and a Nessie server run as local processes (`wap stack ...`)."""
