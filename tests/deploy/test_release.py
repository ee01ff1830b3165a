"""What a release is made of, checked without publishing anything (docs/container.md,
docs/contributing.md "Releases"): the version written once, the wheel carrying every file the
package reads at run time, and the release workflow valid for GitHub Actions.

`.ci/package` builds the sdist and the wheel, checks them with twine and installs the wheel
with pipx (too slow for this suite); `.ci/container` builds the image with
`deploy/build-image.sh`.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from click.testing import CliRunner

import forewarn
from forewarn.cli import main

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "forewarn"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
#: check-jsonschema with the schema of GitHub's workflows it ships (no network needed).
CHECK_WORKFLOWS = (
    sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
)  # fmt: skip


def test_the_version_is_written_once_and_shown_by_the_command() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "forewarn.__version__"}
    assert importlib.metadata.version("forewarn") == forewarn.__version__
    shown = CliRunner().invoke(main, ["--version"])
    assert shown.exit_code == 0
    # The release workflow takes the version as the last word of this line.
    assert shown.output == f"forewarn, version {forewarn.__version__}\n"


def test_the_wheel_carries_every_file_the_package_reads(tmp_path: Path) -> None:
    wheel_options = ("--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(tmp_path))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", *wheel_options, str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("forewarn-*.whl")
    assert wheel.name == f"forewarn-{forewarn.__version__}-py3-none-any.whl"
    shipped = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        f"forewarn/{path.relative_to(PACKAGE).as_posix()}"
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sources - shipped == set()
    assert {"forewarn/server/dashboard/app.js", "forewarn/starter/fleet.yaml"} <= shipped


def test_the_release_workflows_are_valid_for_github_actions() -> None:
    assert [path.name for path in WORKFLOWS] == ["release.yml"]
    checked = subprocess.run(
        [*CHECK_WORKFLOWS, *(str(path) for path in WORKFLOWS)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_workflow_with_a_wrong_key_is_refused_by_the_same_check(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.yml"
    text = WORKFLOWS[0].read_text(encoding="utf-8").replace("runs-on:", "runs_on:", 1)
    wrong.write_text(text, encoding="utf-8")
    checked = subprocess.run(
        [*CHECK_WORKFLOWS, str(wrong)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr


def test_the_release_publishes_the_built_distributions_and_the_image() -> None:
    text = WORKFLOWS[0].read_text(encoding="utf-8")
    assert 'tags: ["v*"]' in text
    assert "twine check --strict dist/*" in text
    assert "pypa/gh-action-pypi-publish" in text
    assert "file: Containerfile" in text
