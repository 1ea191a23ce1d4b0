"""Every YAML file under deploy/ passes yamllint (Debian's `yamllint`, installed by
scripts/setup.sh) with deploy/.yamllint: its default rules, 100-column lines, and
warnings counted as errors."""

import subprocess
import sys
import unittest

import grail_sources


class YamllintTest(unittest.TestCase):
    def test_deploy_yaml_is_clean(self):
        yamllint = grail_sources.tool_or_skip(self, "yamllint")
        files = sorted(str(p) for p in grail_sources.DEPLOY.rglob("*.y*ml"))
        self.assertGreaterEqual(len(files), 7, files)
        result = subprocess.run(
            [yamllint, "--strict", "--format", "parsable", "-c",
             str(grail_sources.DEPLOY / ".yamllint")] + files,
            capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


if __name__ == "__main__":
    unittest.main(argv=grail_sources.split_args(sys.argv)[1], verbosity=2)
