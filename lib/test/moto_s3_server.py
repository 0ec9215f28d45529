"""moto's S3 server on a loopback port, checking every request's signature as S3 does.

Run by lib/test/object-stores.ts (startMotoS3) with venv-storage's python:
    python moto_s3_server.py PORT CREDENTIALS_FILE

moto accepts any request until told otherwise. Here it is given an IAM user allowed s3:*
and an access key, then told to authenticate every request from then on (moto's
/moto-api/reset-auth); a wrong key or secret is refused (InvalidAccessKeyId,
SignatureDoesNotMatch). The key is written to CREDENTIALS_FILE as JSON (renamed into place
last: its presence means ready), never printed: the output goes to a log.
"""

import json
import os
import signal
import sys
import urllib.request

import boto3
from moto.server import ThreadedMotoServer

ALLOW_S3 = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


def create_key(endpoint: str) -> dict[str, str]:
    # Before authentication is on, any key is accepted: these only sign the setup's calls.
    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )
    iam.create_user(UserName="tests")
    iam.put_user_policy(UserName="tests", PolicyName="s3", PolicyDocument=json.dumps(ALLOW_S3))
    key = iam.create_access_key(UserName="tests")["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


def authenticate_every_request(endpoint: str) -> None:
    # The number of requests still let through unauthenticated: none.
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(request) as reply:
        reply.read()


def main() -> None:
    port, credentials_file = int(sys.argv[1]), sys.argv[2]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    credentials = create_key(endpoint)
    authenticate_every_request(endpoint)
    partial = f"{credentials_file}.partial"
    with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        json.dump(credentials, file)
    os.rename(partial, credentials_file)
    print(f"moto: S3 on {endpoint}, every request authenticated", flush=True)
    signal.pause()


if __name__ == "__main__":
    main()
