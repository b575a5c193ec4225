#!/usr/bin/env python3
"""bench/scaling_model.py against cases whose answer is known in closed form."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import scaling_model as sm  # noqa: E402

S = 244e6  # bytes
BETA = 1.25e9  # 10 Gb/s


class ScalingModelTest(unittest.TestCase):
    def test_ring_allreduce_without_latency_moves_2_n_minus_1_over_n_of_the_bytes(self):
        link = sm.Link(alpha=0, beta=BETA, cv=0)
        for n in (2, 3, 4, 16, 256):
            self.assertAlmostEqual(sm.allreduce_seconds(n, S, link), 2 * (n - 1) / n * S / BETA)

    def test_ring_allreduce_of_nothing_costs_2_n_minus_1_latencies(self):
        link = sm.Link(alpha=1e-4, beta=BETA, cv=0)
        self.assertAlmostEqual(sm.allreduce_seconds(8, 0, link), 14 * 1e-4)
        self.assertEqual(sm.allreduce_seconds(1, S, link), 0)

    def test_allreduce_step_adds_compute_and_on_one_host_shares_its_cores(self):
        link = sm.Link(alpha=0, beta=BETA, cv=0)
        self.assertAlmostEqual(sm.allreduce_step_seconds(4, S, 0.5, link), 0.5 + 1.5 * S / BETA)
        host = sm.Link(alpha=0, beta=BETA, cv=0, cores=2, measured_cores=2, share=0.5)
        # 4 one-core steps on 2 cores take two step times; every ring step moves S over loopback.
        self.assertAlmostEqual(sm.allreduce_step_seconds(4, S, 0.5, host), 1.0 + 6 * S / BETA)

    def test_order_statistics_of_the_shifted_exponential(self):
        self.assertAlmostEqual(sm.expected_order_statistic(3, 5, 2.0, 0), 2.0)
        self.assertAlmostEqual(sm.expected_order_statistic(4, 4, 1.0, 0.5), 0.5 + 0.5 * (1 + 1 / 2 + 1 / 3 + 1 / 4))
        # The order statistics' means add up to n means.
        self.assertAlmostEqual(sum(sm.expected_order_statistic(k, 7, 1.0, 0.3) for k in range(1, 8)), 7.0)
        with self.assertRaises(ValueError):
            sm.expected_order_statistic(0, 3, 1.0, 0.1)

    def test_mva_of_one_customer_and_of_many(self):
        x = sm.mva(200, 1.0, [0.25, 0.5])
        self.assertAlmostEqual(x[0], 1 / 1.75)
        self.assertAlmostEqual(x[-1], 2.0, places=6)  # the busiest queue saturated: 1 / 0.5
        self.assertTrue(all(a <= b + 1e-12 for a, b in zip(x, x[1:])))  # never falls

    def test_async_one_worker_and_the_shards_ceiling(self):
        link = sm.Link(alpha=1e-4, beta=BETA, cv=0)
        x = sm.async_steps_per_s(256, 4, S, 0.1, link)
        self.assertAlmostEqual(x[0], 1 / (0.1 + 4e-4 + 2 * S / BETA))
        self.assertLessEqual(x[-1], 4 * BETA / S)
        self.assertGreater(x[-1], 0.95 * 4 * BETA / S)

    def test_sync_without_variance_or_latency_pulls_and_pushes_through_one_shard(self):
        link = sm.Link(alpha=0, beta=BETA, cv=0)
        for n in (1, 2, 8):
            self.assertAlmostEqual(sm.sync_step_seconds(n, 0, 1, S, 0.3, link), 0.3 + 2 * n * S / BETA)
        # With as many shards as workers, each worker's own NIC is the limit.
        self.assertAlmostEqual(sm.sync_step_seconds(8, 0, 8, S, 0.3, link), 0.3 + 2 * S / BETA)

    def test_backup_workers_cut_the_straggler_tail(self):
        link = sm.Link(alpha=0, beta=1e15, cv=0.5)
        all_of_them = sm.sync_step_seconds(20, 0, 1, 0, 1.0, link)
        self.assertAlmostEqual(all_of_them, sm.expected_order_statistic(20, 20, 1.0, 0.5))
        self.assertLess(sm.sync_step_seconds(20, 2, 1, 0, 1.0, link), all_of_them)
        with self.assertRaises(ValueError):
            sm.sync_step_seconds(2, 2, 1, S, 1.0, link)

    def test_knee_is_where_efficiency_stays_below_half(self):
        rows = [(n, 0, 0, 0, eff) for n, eff in [(2, 0.4), (3, 0.6), (4, 0.45), (5, 0.3)]]
        self.assertEqual(sm.knee(rows), 4)
        self.assertIsNone(sm.knee(rows[:2]))

    def test_check_compares_an_allreduce_point_with_its_prediction(self):
        figures = {"round_trip_us": 0.0001, "bandwidth_gb_per_s": 1.048576, "cores": 2, "mlp_step_ms": 1}
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "m.json"), "w") as f:
                json.dump(figures, f)
            with open(os.path.join(d, "p.jsonl"), "w") as f:
                f.write('{"procs":2,"mib":1,"median_ms":2.5}\n')
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                sm.main(["--measured", os.path.join(d, "m.json"), "--check", os.path.join(d, "p.jsonl")])
        # 2 ring steps of 1 MiB at 1 MiB/ms over loopback: 2 ms against 2.5 measured.
        self.assertIn("| 2 | 2.5 | -20% |", out.getvalue())

    def test_the_default_tables_name_themselves_predictions_and_give_a_knee(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            sm.main([])
        text = out.getvalue()
        self.assertTrue(text.startswith("MODEL PREDICTIONS, not measurements"))
        self.assertEqual(text.count("knee (efficiency < 50%)"), 2 * (2 * 2 + 1))


if __name__ == "__main__":
    unittest.main()
