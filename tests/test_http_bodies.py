"""Request bodies processed at once are bounded by their bytes ([http] body_budget), and the
memory a large body took is given back: eight 15 MiB posts at once took 1.5 GB that stayed."""
import http.client
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import served
from http_app import AUTH, STREAM
from rspstar.endpoint.http.bodies import TRIM_FROM_BYTES, BodyBudget
from rspstar.endpoint.http.errors import BodiesInFlight


def test_bodies_share_the_budget_and_one_alone_always_fits():
    trims = []
    budget = BodyBudget(100, wait=0, trim=lambda: trims.append(1))
    budget.take(60)
    budget.take(40)
    with pytest.raises(BodiesInFlight, match="body_budget = 100"):
        budget.take(1)
    assert budget.refused == 1
    budget.give_back(60)
    budget.give_back(40)
    budget.take(1000)               # larger than the budget, but alone
    assert budget.in_use == 1000
    budget.give_back(1000)
    assert trims == []              # small bodies: the allocator reuses their memory anyway
    budget.take(TRIM_FROM_BYTES)
    budget.give_back(TRIM_FROM_BYTES)
    assert trims == [1]


def test_a_waiting_body_goes_in_as_soon_as_room_is_given_back():
    budget = BodyBudget(100, wait=60, trim=lambda: None)
    budget.take(80)
    taken = threading.Event()

    def waiter():
        budget.take(50)
        taken.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not taken.wait(0.05)
    budget.give_back(80)
    thread.join(10)
    assert taken.is_set() and budget.in_use == 50


def test_a_post_beyond_the_budget_is_503_with_retry_after_and_every_body_gives_its_bytes_back(client):
    budget = BodyBudget(len(STREAM) + 10, wait=0, trim=lambda: None)
    client.application.extensions["rspstar"].body_budget = budget
    budget.take(20)                                 # another body in flight
    refused = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=STREAM,
                          content_type="application/trig", headers=AUTH)
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "2"
    assert "body_budget" in refused.get_json()["message"]
    budget.give_back(20)
    accepted = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=STREAM,
                           content_type="application/trig", headers=AUTH)
    assert accepted.status_code == 202 and budget.in_use == 0
    bad = client.post("/streams", query_string={"stream": "http://example.org/s"}, data=b"<a> <b>",
                      content_type="application/n-quads", headers=AUTH)
    assert bad.status_code == 400 and budget.in_use == 0
    # A write refused before its body is read takes nothing from the budget.
    budget.take(len(STREAM) + 10)
    assert client.post("/update", data={"update": "INSERT DATA { <a:a> <a:b> <a:c> }"}).status_code == 401


def memory_mib(pid: int, what: str) -> float:
    """VmRSS (resident now) or VmHWM (the most resident so far) of a process."""
    for line in open("/proc/%d/status" % pid):
        if line.startswith(what + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no " + what)


@pytest.mark.slow
def test_eight_large_posts_at_once_leave_the_server_near_the_memory_it_had():
    process, base, port = served.start(token="t", max_body=16 << 20, threads=12)
    line = b"<http://example.org/o%d> <http://example.org/v> \"%d\" <http://example.org/g%d> .\n"
    body = b"".join(line % (k, k, k % 1000) for k in range(190_000))[: 15 << 20]
    body = body[: body.rindex(b"\n") + 1] + b"<broken\n"        # read to its end, stored never

    def post(_):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            connection.request("POST", "/streams?stream=http://example.org/s", body=body,
                               headers={"Authorization": "Bearer t", "Content-Type": "application/n-quads"})
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    try:
        before = memory_mib(process.pid, "VmRSS")
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(post, range(16)))
        after, peak = memory_mib(process.pid, "VmRSS"), memory_mib(process.pid, "VmHWM")
    finally:
        process.kill()
        process.wait()
    assert set(statuses) <= {400, 503} and 400 in statuses, statuses
    print("before %.0f MiB, peak %.0f, after %.0f" % (before, peak, after))
    # Unbounded, this took +1,500 MiB and kept it.
    assert after - before < 400 and peak - before < 600, (before, peak, after)
