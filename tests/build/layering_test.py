"""scripts/check_layers.py: the includes of the sources against docs/ARCHITECTURE.md's table.

The real tree must keep to its table; trees made here with one bad include each (up, sideways,
from a folder with no row, RocksDB outside the store) and a table with a loop must fail,
naming what broke, while the arrows the table allows (downwards, followed through other
folders) pass.
"""

import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def check(root):
    run = subprocess.run([sys.executable, "-B", str(SCRIPT), "--root", str(root)],
                         capture_output=True, text=True, timeout=120)
    return run.returncode, run.stdout + run.stderr


class LayeringTest(unittest.TestCase):
    def setUp(self):
        self.root = Path(tempfile.mkdtemp(prefix="layering_test_"))
        (self.root / "docs").mkdir()
        shutil.copy(ROOT / "docs" / "ARCHITECTURE.md", self.root / "docs")

    def tearDown(self):
        shutil.rmtree(self.root)

    def write(self, relative, text):
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def test_the_tree_keeps_to_its_table(self):
        code, output = check(ROOT)
        self.assertEqual(code, 0, output)

    def test_arrows_down_and_through_other_folders_pass(self):
        self.write("model/fusion/a.cc", '#include "model/grail/grail_model.h"\n')
        # rpc -> metrics -> scoring -> model/ -> model/path/ -> model/ops/
        self.write("server/rpc/a.cc", '#include "model/ops/rspmm.h"\n#include "kg/v1/x.pb.h"\n')
        self.write("store/a.cc", "#include <rocksdb/db.h>\n#include <vector>\n")
        code, output = check(self.root)
        self.assertEqual(code, 0, output)

    def test_an_include_up_fails_naming_the_file_and_line(self):
        self.write("graph/a.h", '#include <vector>\n#include "store/triple_store.h"\n')
        code, output = check(self.root)
        self.assertEqual(code, 1, output)
        self.assertIn("graph/a.h:2: includes store/triple_store.h: graph/ -> store/", output)

    def test_an_include_sideways_fails(self):
        self.write("model/path/a.cc", '#include "model/grail/grail_model.h"\n')
        self.write("server/replication/b.cc", '#include "server/rpc/graph_service.h"\n')
        self.write("server/wire/c.cc", '#include "server/rpc/malformed_requests.h"\n')
        code, output = check(self.root)
        self.assertEqual(code, 1, output)
        self.assertIn("model/path/a.cc:1:", output)
        self.assertIn("server/replication/b.cc:1:", output)
        self.assertIn("server/wire/c.cc:1:", output)

    def test_a_folder_with_no_row_fails(self):
        self.write("model/newfamily/a.cc", '#include "graph/ids.h"\n')
        self.write("graph/b.cc", '#include "model/newfamily/a.h"\n')
        code, output = check(self.root)
        self.assertEqual(code, 1, output)
        self.assertIn("model/newfamily/a.cc: its folder has no row", output)
        self.assertIn("graph/b.cc:1: includes model/newfamily/a.h, whose folder has no row",
                      output)

    def test_rocksdb_or_libtorch_outside_their_folders_fails(self):
        self.write("server/scoring/a.cc", "#include <rocksdb/db.h>\n")
        self.write("server/engine/b.cc", '#include "torch/torch.h"\n')
        code, output = check(self.root)
        self.assertEqual(code, 1, output)
        self.assertIn("server/scoring/a.cc:1: includes rocksdb/db.h", output)
        self.assertIn("server/engine/b.cc:1: includes torch/torch.h", output)

    def test_a_table_with_a_loop_fails(self):
        architecture = self.root / "docs" / "ARCHITECTURE.md"
        text = architecture.read_text(encoding="utf-8")
        row = "| `graph/` |"
        start = text.index(row)
        end = text.index("\n", start)
        line = text[start:end]
        looped = line[:line.rindex("|", 0, len(line) - 1)] + "| `common/`, `store/` |"
        architecture.write_text(text[:start] + looped + text[end:], encoding="utf-8")
        code, output = check(self.root)
        self.assertEqual(code, 1, output)
        self.assertIn("loop", output)


if __name__ == "__main__":
    unittest.main()
