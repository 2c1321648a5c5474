#!/usr/bin/python3
"""Tests of perf/storage_node.py on this machine's loopback: a file put
comes back whole and in byte ranges (as perf/dcp_wasted.py's reader asks
for them), and a range outside the file or a bad name is refused with a
message."""
import io
import os
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("TACL_PERF_DIR",
                                  os.path.join(HERE, "..", "..", "perf")))
import storage_node  # noqa: E402


class StorageNode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = os.path.join(cls.tmp.name, "store")
        os.mkdir(root)
        cls.srv = storage_node.Server(("127.0.0.1", 0), storage_node.Handler)
        cls.srv.root = root
        cls.addr = f"127.0.0.1:{cls.srv.server_address[1]}"
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        cls.data = bytes((i * 7 + i // 251) % 256 for i in range(300000))
        local = os.path.join(cls.tmp.name, "up")
        with open(local, "wb") as f:
            f.write(cls.data)
        storage_node.put(cls.addr, local, "ckpt.rank0")

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()
        cls.tmp.cleanup()

    def fetch(self, *span):
        buf = io.BytesIO()
        n = storage_node.fetch(self.addr, "ckpt.rank0", buf, *span)
        self.assertEqual(n, len(buf.getvalue()))
        return buf.getvalue()

    def test_whole(self):
        self.assertEqual(self.fetch(), self.data)

    def test_ranges(self):
        for offset, length in ((0, 1), (12345, 100000), (299999, 1),
                               (300000, 0), (1 << 17, 1 << 17)):
            self.assertEqual(self.fetch(offset, length),
                             self.data[offset:offset + length])

    def test_range_outside(self):
        for offset, length in ((299999, 2), (300001, 0)):
            with self.assertRaises(SystemExit) as e:
                self.fetch(offset, length)
            self.assertIn("outside the file's 300000 bytes",
                          str(e.exception))

    def test_refused_get_leaves_no_file(self):
        local = os.path.join(self.tmp.name, "down")
        with self.assertRaises(SystemExit):
            storage_node.get(self.addr, "ckpt.rank0", local, 300000, 1)
        self.assertFalse(os.path.exists(local))

    def test_bad_name(self):
        with self.assertRaises(SystemExit) as e:
            storage_node.fetch(self.addr, "../etc", io.BytesIO())
        self.assertIn("bad request", str(e.exception))


if __name__ == "__main__":
    unittest.main()
