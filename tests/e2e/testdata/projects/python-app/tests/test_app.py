import unittest

from app import greet


class GreetTest(unittest.TestCase):
    def test_greets_loudly(self):
        self.assertEqual(greet("abox"), "HELLO ABOX!")


if __name__ == "__main__":
    unittest.main()
