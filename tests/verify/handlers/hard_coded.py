"""The good test handler with Azure's address written in, as many handlers have it: it reads
no environment variable, so only `forewarn verify --namespace` can reach it."""

import os

from _loop import main

os.environ.pop("FOREWARN_IMDS_ENDPOINT", None)
main(None, base="http://169.254.169.254")
