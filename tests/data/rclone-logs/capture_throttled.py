"""Make s3_throttled.jsonl: an upload to rclone serve s3 through tests/infra/throttle.py, which
answers four part uploads with 503 SlowDown, logged as the timed copies on S3 log
(cloudbench.measure.rclone.RESPONSE_LOG_FLAGS). Run from the checkout:
``.venv/bin/python tests/data/rclone-logs/capture_throttled.py <dir with 2 files>``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.infra.s3 import serve_s3  # noqa: E402
from tests.infra.throttle import throttling_proxy  # noqa: E402


def main(src: str) -> None:
    rclone = str(ROOT / ".venv/bin/rclone")
    out = Path(__file__).with_name("s3_throttled.jsonl")
    with tempfile.TemporaryDirectory() as tmp, serve_s3(rclone, Path(tmp) / "root") as s3:
        env = {**os.environ, **s3.client_env("T")}
        subprocess.run([rclone, "mkdir", "T:bkt"], env=env, check=True)
        with throttling_proxy(s3.port, every=2, limit=4) as throttle:
            env["RCLONE_CONFIG_T_ENDPOINT"] = f"http://127.0.0.1:{throttle.port}"
            out.unlink(missing_ok=True)
            subprocess.run(
                [
                    rclone, "copy", src, "T:bkt/up", "--log-file", str(out),
                    "--use-json-log", "--stats", "1s", "--stats-log-level", "INFO", "-v",
                    "-vv", "--s3-sdk-log-mode", "Retries,Response", "--s3-chunk-size", "5M",
                    "--s3-upload-cutoff", "5M", "--s3-upload-concurrency", "1",
                    "--transfers", "1",
                ],
                env=env,
                check=True,
            )  # fmt: skip
    print(f"refused {len(throttle.refused)}: {throttle.refused}")


if __name__ == "__main__":
    main(sys.argv[1])
