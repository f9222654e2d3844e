from rspstar.endpoint.engine.r2s import r2s_operator
from rspstar.translator.model import R2S


def run(op, evaluations):
    operator = r2s_operator(op, lambda row: row)
    return [operator.apply(rows) for rows in evaluations]


def test_rstream_emits_everything_including_duplicates():
    assert run(R2S.RSTREAM, [["a", "a", "b"], ["b"]]) == [["a", "a", "b"], ["b"]]


def test_istream_emits_new_distinct_solutions():
    assert run(R2S.ISTREAM, [["a", "b", "b"], ["b", "c"], [], ["c"]]) == [["a", "b"], ["c"], [], ["c"]]


def test_dstream_emits_expired_distinct_solutions():
    assert run(R2S.DSTREAM, [["a", "b"], ["b", "c"], [], ["c"]]) == [[], ["a"], ["b", "c"], []]
