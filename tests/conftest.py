import os
import sys

# the shared gradient-check helpers live beside the tests
sys.path.insert(0, os.path.dirname(__file__))
