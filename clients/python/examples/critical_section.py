"""A critical section with a fencing token, with the blocking client.
Start a node (make run), then: python3 examples/critical_section.py"""

from __future__ import annotations

import lockd

last_token = 0  # what the protected resource keeps: the largest token it saw


def write(token: int, step: int) -> None:
    global last_token
    if token < last_token:  # a client that woke up late, after losing the lock
        raise RuntimeError(f"refused: token {token} is older than {last_token}")
    last_token = token
    print(f"step {step} written under token {token}")


def main() -> None:
    with lockd.Client() as client:  # LOCKD_ADDR, else 127.0.0.1:7070
        with client.hold("deploy", lease=2) as lock:  # renews itself every lease/3
            for step in range(5):
                lock.check()  # raises lockd.LockLost once the lock is lost
                write(lock.token, step)
                if lock.lost.wait(0.5):  # sleep, but wake at once if the lock is lost
                    break
        print("hold ended:", lock.reason)  # "released", or why it was lost
        with client.try_acquire("report", lease=30) as report:
            print("report is busy" if report is None else f"report held under token {report.token}")


if __name__ == "__main__":
    main()
