"""Object operations on the local S3 test server for energon-rs tests (boto3, which moto brings).

Usage: s3tool.py ENDPOINT COMMAND ARGS...
  mb BUCKET                          create a bucket
  put-dir LOCAL BUCKET PREFIX        upload every file under LOCAL to PREFIX/<relative path>
  get-dir BUCKET PREFIX LOCAL        download every object under PREFIX into LOCAL
  put LOCAL BUCKET KEY               upload one file
  rm BUCKET KEY                      delete one object
"""

import os
import sys

import boto3


def main() -> None:
    endpoint, cmd, *args = sys.argv[1:]
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    if cmd == "mb":
        s3.create_bucket(Bucket=args[0])
    elif cmd == "put-dir":
        local, bucket, prefix = args
        for root, _dirs, files in os.walk(local):
            for name in files:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, local).replace(os.sep, "/")
                key = f"{prefix.strip('/')}/{rel}" if prefix.strip("/") else rel
                s3.upload_file(path, bucket, key)
    elif cmd == "get-dir":
        bucket, prefix, local = args
        prefix = prefix.strip("/")
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(prefix) :].lstrip("/")
                path = os.path.join(local, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                s3.download_file(bucket, obj["Key"], path)
    elif cmd == "put":
        local, bucket, key = args
        s3.upload_file(local, bucket, key)
    elif cmd == "rm":
        bucket, key = args
        s3.delete_object(Bucket=bucket, Key=key)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
