#!/usr/bin/python3
"""Tests of report.py: its parser on captured perf output (testdata/) and
the busbw arithmetic (nccl-tests: busbw = algbw * factor, algbw = bytes /
time; factor (n-1)/n for all-gather and reduce-scatter, 2(n-1)/n for
all-reduce)."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("TACL_PERF_DIR",
                                  os.path.join(HERE, "..", "..", "perf")))
import report  # noqa: E402

DATA = os.path.join(HERE, "testdata")


def sample(name):
    return report.parse_file(os.path.join(DATA, name))


class Factors(unittest.TestCase):
    def test_factors(self):
        self.assertAlmostEqual(report.bus_factor("all_gather", 4), 0.75)
        self.assertAlmostEqual(report.bus_factor("reduce_scatter", 2), 0.5)
        self.assertAlmostEqual(report.bus_factor("all_reduce", 4), 1.5)
        self.assertAlmostEqual(report.bus_factor("all_reduce", 3), 4 / 3)
        self.assertAlmostEqual(report.bus_factor("broadcast", 8), 1.0)

    def test_by_hand(self):
        # 64 KiB all-reduce on 3 ranks in 104.4 us.
        self.assertAlmostEqual(report.algbw(65536, 104.4), 0.6277394636, 9)
        self.assertAlmostEqual(report.busbw("all_reduce", 3, 65536, 104.4),
                               0.8369859515, 9)
        # 1 GB in 1 s is 1 GB/s; on 2 ranks all-gather's bus carries half.
        self.assertAlmostEqual(report.busbw("all_gather", 2, 10**9, 1e6),
                               0.5)
        self.assertEqual(report.algbw(100, 0), 0.0)


class Parse(unittest.TestCase):
    def check_printed(self, run, places):
        """The printed algbw/busbw agree with the recomputed ones."""
        coll = report.COLL_ALIASES[run["collective"]]
        n = run["nranks"]
        for r in run["results"]:
            for p in ("out_of_place", "in_place"):
                t = r[p]["time_us"]
                self.assertAlmostEqual(report.algbw(r["size"], t),
                                       r[p]["algbw"], places=places)
                self.assertAlmostEqual(report.busbw(coll, n, r["size"], t),
                                       r[p]["busbw"], places=places)

    def parsed(self, name, nresults=None, **fields):
        """The run of testdata/NAME, checked to have FIELDS and, when
        given, NRESULTS result rows."""
        run = sample(name)
        for key, value in fields.items():
            self.assertEqual(run[key], value, key)
        if nresults is not None:
            self.assertEqual(len(run["results"]), nresults)
        return run

    def test_text(self):
        run = self.parsed("report_tacl_all_reduce_3.txt", library="tacl",
                          collective="all_reduce", nranks=3,
                          algorithm="auto")
        # The counters lines ("#   bytes/op ...") are not rows.
        self.assertEqual([r["size"] for r in run["results"]],
                         [65536, 262144])
        self.assertEqual(run["results"][1]["count"], 65536)
        self.assertEqual(run["results"][0]["out_of_place"]["time_us"], 104.4)
        self.assertEqual(run["results"][1]["in_place"]["time_us"], 629.2)
        self.assertEqual(run["results"][0]["in_place"]["wrong"], 0)
        # Two decimals printed.
        self.check_printed(run, 2)

    def test_cluster_prefix(self):
        run = self.parsed("report_tacl_reduce_scatter_cluster_2.txt",
                          nresults=1, collective="reduce_scatter", nranks=2)
        self.assertEqual(run["results"][0]["out_of_place"]["time_us"],
                         6454.3)
        self.check_printed(run, 2)

    def test_json(self):
        run = self.parsed("report_gloo_all_gather_4.json", nresults=2,
                          library="gloo", nranks=4)
        # Four decimals written.
        self.check_printed(run, 4)

    def test_garbage(self):
        with self.assertRaises(ValueError):
            report.parse_text("no header here\n 1 2 3\n")

    def test_records(self):
        run = sample("report_tacl_all_reduce_3.txt")
        rows = report.records(run, "shm", default=True)
        self.assertEqual(len(rows), 4)
        first = rows[0]
        self.assertEqual((first["library"], first["setting"],
                          first["collective"], first["ranks"],
                          first["bytes"], first["placement"]),
                         ("tacl", "shm", "all_reduce", 3, 65536,
                          "out_of_place"))
        self.assertAlmostEqual(first["busbw"], 0.8369859515, 9)
        self.assertEqual(rows[1]["placement"], "in_place")
        self.assertAlmostEqual(rows[1]["busbw"],
                               65536 / 1e3 / 441.5 * 4 / 3, 12)


class Collect(unittest.TestCase):
    def test_names_and_outputs(self):
        d = tempfile.mkdtemp()
        try:
            raw = os.path.join(d, "raw")
            os.mkdir(raw)
            shutil.copy(os.path.join(DATA, "report_gloo_all_gather_4.json"),
                        os.path.join(raw, "shm.4.all_gather.1.gloo."
                                     "default.json"))
            shutil.copy(os.path.join(DATA, "report_tacl_all_reduce_3.txt"),
                        os.path.join(raw, "shm.3.all_reduce.1.tacl."
                                     "auto.json"))
            rows = report.collect(raw)
            self.assertEqual(len(rows), 8)
            gloo = [r for r in rows if r["library"] == "gloo"]
            self.assertEqual({r["algorithm"] for r in gloo}, {"ring"})
            self.assertTrue(all(r["default"] for r in rows))
            self.assertEqual(report.generate(raw, d), 0)
            with open(os.path.join(d, "report.csv")) as f:
                lines = f.read().splitlines()
            self.assertEqual(lines[0], "library,algorithm,setting,ranks,"
                             "collective,bytes,time_us,busbw,placement,"
                             "wrong")
            self.assertEqual(len(lines), 9)
            self.assertIn("tacl,auto,shm,3,all_reduce,65536,104.400,"
                          "0.8370,out_of_place,0", lines)
            with open(os.path.join(d, "report.md")) as f:
                md = f.read()
            self.assertIn("## all_reduce, shm, 3 ranks", md)
            self.assertIn("| 64K | 0.84 |", md)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main(verbosity=2)
