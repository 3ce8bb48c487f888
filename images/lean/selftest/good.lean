-- A theorem the image must accept, using Mathlib.
import Mathlib.Algebra.Group.Basic
import Mathlib.Tactic.Ring

theorem selftest_good (a b : ℤ) : (a + b) ^ 2 = a ^ 2 + 2 * a * b + b ^ 2 := by ring
