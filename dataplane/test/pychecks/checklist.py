"""The runner every client-driven check script shares (tritonclient gRPC and HTTP, the openai
SDK, the KServe SDK): checks register with @checks.add, run in order, and the script prints one
line per check and 'N passed, N failed', exiting non-zero if any failed.
Scripts outside this folder import it after putting the folder on sys.path.
"""

import asyncio
import inspect
import sys
import traceback


class Checklist:
    def __init__(self):
        self.functions = []
        # One loop for every coroutine check: async clients keep connections bound to it.
        self.loop = None

    def _settle(self, result):
        if inspect.isawaitable(result):
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
            self.loop.run_until_complete(result)

    def add(self, function):
        self.functions.append(function)
        return function

    def run(self, *args, close=None):
        """Runs every check (coroutines too) with `args`; then `close`; exits with the verdict."""
        passed = failed = 0
        for function in self.functions:
            try:
                self._settle(function(*args))
                passed += 1
                print(f"ok   {function.__name__}")
            except Exception:
                failed += 1
                print(f"FAIL {function.__name__}\n{traceback.format_exc()}")
        if close is not None:
            self._settle(close())
        print(f"{passed} passed, {failed} failed")
        sys.exit(1 if failed else 0)
