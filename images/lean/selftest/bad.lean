-- A false statement the image must reject.
theorem selftest_bad : 2 + 2 = 5 := by decide
