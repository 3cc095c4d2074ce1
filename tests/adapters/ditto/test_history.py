"""History sources and the RQL subset, without any network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sansrs.adapters.ditto.history import (
    HistoryRequest,
    InMemoryHistory,
    JsonLinesHistory,
    fold_things,
    search_pages,
    select_events,
)
from sansrs.adapters.ditto.rql import MAX_DEPTH, RqlError, parse_rql

from sansrs.ditto import DittoException, Headers, Kind, SearchOptions, SubscribeOptions, Topic
from tests.adapters.ditto.helpers import EXAMPLE_HISTORY, NS, counter_history, events_of

THING = {
    "thingId": "ns:t",
    "attributes": {"n": 5, "s": "Kitchen", "b": True, "nothing": None, "x": 2.5},
    "features": {"temp": {"properties": {"value": 21}}},
}


@pytest.mark.parametrize(
    ("rql", "expected"),
    [
        ("eq(attributes/n,5)", True),
        ("eq(/attributes/n,5)", True),  # Ditto's docs write a leading slash
        ("eq(attributes/n,5.0)", True),
        ('eq(attributes/n,"5")', False),  # different kinds never compare equal
        ("ne(attributes/n,4)", True),
        ("ne(attributes/missing,4)", True),
        ("eq(attributes/b,true)", True),
        ("eq(attributes/b,1)", False),  # a boolean is not a number
        ("eq(attributes/nothing,null)", True),
        ("gt(attributes/n,4)", True),
        ("ge(attributes/n,5)", True),
        ("lt(attributes/x,3)", True),
        ("le(attributes/x,2)", False),
        ('gt(attributes/s,"A")', True),
        ('gt(attributes/s,1)', False),
        ("gt(attributes/missing,1)", False),
        ("in(attributes/n,1,2,5)", True),
        ("in(attributes/n,1,2)", False),
        ('like(attributes/s,"Kit*")', True),
        ('like(attributes/s,"kit*")', False),
        ('ilike(attributes/s,"kit*")', True),
        ('like(attributes/s,"K?tchen")', True),
        ('like(attributes/s,"K.tchen")', False),  # regex characters are literal
        ("exists(features/temp/properties/value)", True),
        ("exists(features/humidity)", False),
        ("and(exists(attributes),gt(attributes/n,1),lt(attributes/n,9))", True),
        ("or(eq(attributes/n,1),eq(attributes/n,5))", True),
        ("not(eq(attributes/n,5))", False),
        ('eq(thingId,"ns:t")', True),
        ('eq(attributes/s,"with \\"quote\\"")', False),
        ("  eq( attributes/n , 5 )  ", True),
    ],
)
def test_rql_operators(rql: str, expected: bool) -> None:
    assert parse_rql(rql)(THING) is expected


@pytest.mark.parametrize(
    "rql",
    [
        "",
        "eq(",
        "eq(a,1",
        "eq(a)",
        "eq(a,1,2)",
        "gt(a,foo)",
        'eq(a,"unterminated)',
        "unknown(a,1)",
        "eq(a,1) extra",
        "and()",
        'like(a,1)',
        "(a,1)",
        "eq(,1)",
        "not(eq(a,1),eq(b,2))",
    ],
)
def test_rql_rejects_invalid_expressions(rql: str) -> None:
    with pytest.raises(RqlError):
        parse_rql(rql)


def test_rql_nesting_and_length_are_bounded() -> None:
    deep = "not(" * (MAX_DEPTH + 1) + "exists(a)" + ")" * (MAX_DEPTH + 1)
    with pytest.raises(RqlError, match="deeper"):
        parse_rql(deep)
    assert parse_rql("not(" * 10 + "exists(a)" + ")" * 10)({"a": 1}) is True
    with pytest.raises(RqlError, match="longer"):
        parse_rql("eq(a," + "1" * 70_000 + ")")


@given(st.text(max_size=200))
def test_rql_never_raises_anything_but_rql_error(text: str) -> None:
    try:
        predicate = parse_rql(text)
    except RqlError:
        return
    predicate(THING)  # whatever parsed, evaluates without raising


def _revisions(options: SubscribeOptions, n: int = 10) -> list[int]:
    events = counter_history("t", n)
    return [e["revision"] for e in select_events(events, options, f"{NS}:t", n)]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, list(range(1, 11))),
        ({"from_historical_revision": 0}, list(range(1, 11))),
        ({"from_historical_revision": 8}, [8, 9, 10]),
        ({"to_historical_revision": 3}, [1, 2, 3]),
        ({"from_historical_revision": -1}, [10]),
        ({"from_historical_revision": -3, "to_historical_revision": -1}, [8, 9]),
        ({"to_historical_revision": 0}, list(range(1, 11))),
        ({"from_historical_revision": -20}, list(range(1, 11))),
        ({"from_historical_revision": 5, "to_historical_revision": 4}, []),
        ({"from_historical_timestamp": "2023-01-01T00:00:09Z"}, [9, 10]),
        ({"to_historical_timestamp": "2023-01-01T00:00:02.000Z"}, [1, 2]),
    ],
)
def test_select_events_ranges(options: dict[str, Any], expected: list[int]) -> None:
    assert _revisions(SubscribeOptions(**options)) == expected


def test_select_events_without_timestamps_are_left_out_of_time_ranges() -> None:
    events = [{"topic": f"{NS}/t/things/twin/events/modified", "revision": 1}]
    options = SubscribeOptions(from_historical_timestamp="2020-01-01T00:00:00Z")
    assert list(select_events(events, options, f"{NS}:t", 1)) == []
    assert list(select_events(events, SubscribeOptions(), f"{NS}:t", 1)) == events


def test_select_events_compiles_the_filter_before_the_first_pull() -> None:
    with pytest.raises(DittoException) as info:
        select_events([], SubscribeOptions(filter="eq("), f"{NS}:t", 0)
    assert info.value.error.error == "rql.expression.invalid"
    assert info.value.error.status == 400


def test_fold_things_applies_created_modified_deleted() -> None:
    events = [
        {"topic": "a/x/things/twin/events/created", "path": "/", "value": {"attributes": {"k": 1}}},
        {"topic": "a/x/things/twin/events/modified", "path": "/attributes/k", "value": 2},
        {"topic": "a/x/things/twin/events/merged", "path": "/features/f/properties/v", "value": 3},
        {"topic": "a/x/things/twin/events/deleted", "path": "/attributes/k"},
        {"topic": "a/y/things/twin/events/created", "path": "/", "value": {}},
        {"topic": "a/y/things/twin/events/deleted", "path": "/"},
        {"topic": "a/p/policies/events/created", "path": "/", "value": {}},
    ]
    assert fold_things(events) == {
        "a:x": {"attributes": {}, "thingId": "a:x", "features": {"f": {"properties": {"v": 3}}}}
    }


def test_search_pages_size_sort_fields_namespaces() -> None:
    things = {
        f"{ns}:t{i}": {"thingId": f"{ns}:t{i}", "attributes": {"i": i, "odd": i % 2 == 1}}
        for ns in ("a", "b")
        for i in range(5)
    }
    pages = list(search_pages(things, SearchOptions(
        filter="eq(attributes/odd,true)", options="size(1),sort(-attributes/i)",
        namespaces=("a",), fields="thingId",
    )))
    assert pages == [[{"thingId": "a:t3"}], [{"thingId": "a:t1"}]]
    everything = list(search_pages(things, SearchOptions()))
    assert [len(p) for p in everything] == [10]  # default page size 25
    assert [t["thingId"] for t in everything[0]][:2] == ["a:t0", "a:t1"]  # sort(+thingId)


@pytest.mark.parametrize(
    "options", ["size(0)", "size(201)", "size(x)", "sort(thingId)", "limit(1,2)", "size(1"]
)
def test_search_rejects_invalid_options(options: str) -> None:
    with pytest.raises(DittoException) as info:
        search_pages({}, SearchOptions(options=options))
    assert info.value.error.error == "thing-search:search.option.invalid"
    assert info.value.error.description == "At least one provided option is invalid."


def _request(entity: str, group: str = "things", **options: Any) -> HistoryRequest:
    namespace, name = entity.split(":")
    return HistoryRequest(
        subscription_id="0",
        kind=Kind.STREAMING,
        topic=Topic(namespace=namespace, entity_name=name, group=group,
                    channel="twin" if group == "things" else None, criterion="streaming",
                    action="subscribeForPersistedEvents"),
        options=SubscribeOptions(**options),
        headers=Headers(),
    )


@pytest.mark.parametrize("make", [lambda: JsonLinesHistory(EXAMPLE_HISTORY),
                                  lambda: InMemoryHistory(events_of("thing-1")
                                                          + events_of("policy-1"))])
def test_sources_agree(make: Any) -> None:
    source = make()
    assert list(source.open(_request(f"{NS}:thing-1"))) == events_of("thing-1")
    assert [e["revision"] for e in source.open(_request(f"{NS}:thing-1",
                                                        from_historical_revision=-2))] == [6, 7]
    with pytest.raises(DittoException) as thing:
        source.open(_request(f"{NS}:nope"))
    with pytest.raises(DittoException) as policy:
        source.open(_request(f"{NS}:nope", group="policies"))
    assert thing.value.error.error == "things:thing.notfound"
    assert policy.value.error.error == "policies:policy.notfound"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json}\n", "bad.jsonl:1: invalid JSON"),
        ("# comment\n\n[1]\n", "bad.jsonl:3: not a JSON object"),
        ('{"topic": "a/b"}\n', "bad.jsonl:1: not an event message"),
        ('{"revision": 1}\n', "bad.jsonl:1: not an event message"),
    ],
)
def test_json_lines_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        JsonLinesHistory(path)


def test_in_memory_append_checks_the_topic() -> None:
    with pytest.raises(ValueError, match="not an event message"):
        InMemoryHistory([{"topic": 5}])


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("*", "", True),
        ("", "", True),
        ("", "a", False),
        ("a*b*c", "axxbyyc", True),
        ("a*b*c", "axxbyy", False),
        ("*a*a*a*a*a*a*a*a*a*a*a*a*b", "a" * 5000, False),  # linear-ish, no blow-up
        ("?*?", "ab", True),
        ("?*?", "a", False),
        ("*x", "xxxx", True),
    ],
)
def test_like_wildcards(pattern: str, text: str, expected: bool) -> None:
    assert parse_rql(f'like(v,"{pattern}")')({"v": text}) is expected


def _counting_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the JSON documents the history module parses."""
    import json

    from sansrs.adapters.ditto import history

    parsed = [0]

    class CountingJson:
        @staticmethod
        def loads(text: str) -> Any:
            parsed[0] += 1
            return json.loads(text)

    monkeypatch.setattr(history, "json", CountingJson)
    return parsed


def test_json_lines_history_parses_the_file_once_then_only_the_entitys_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding: every subscribe parsed the whole file (48 KiB of subscribes
    cost 48 s of server CPU). The file is indexed once; a subscribe then
    parses only its entity's lines, as they are pulled."""
    import json

    path = tmp_path / "history.jsonl"
    with path.open("w", encoding="utf-8") as out:
        out.write("# 100 things, 10 revisions each, interleaved\n\n")
        for revision in range(1, 11):
            for thing in range(100):
                out.write(json.dumps({
                    "topic": f"{NS}/t{thing}/things/twin/events/modified",
                    "path": "/attributes/n", "value": revision, "revision": revision,
                }) + "\n")
    parsed = _counting_loads(monkeypatch)
    source = JsonLinesHistory(path)
    assert parsed[0] == 1000  # indexed: each line once
    for _ in range(50):
        parsed[0] = 0
        events = list(source.open(_request(f"{NS}:t42")))
        assert [e["revision"] for e in events] == list(range(1, 11))
        assert {e["topic"] for e in events} == {f"{NS}/t42/things/twin/events/modified"}
        assert parsed[0] == 10  # its own 10 lines, not the file's 1000
    parsed[0] = 0
    first = list(source.open(_request(f"{NS}:t7", from_historical_revision=-2)))
    assert [e["revision"] for e in first] == [9, 10] and parsed[0] == 10
    # Lazily: a subscriber that took one event made one parse.
    parsed[0] = 0
    assert next(iter(source.open(_request(f"{NS}:t3"))))["revision"] == 1
    assert parsed[0] == 1


def test_json_lines_history_folds_the_file_once_for_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(EXAMPLE_HISTORY.read_text(encoding="utf-8"), encoding="utf-8")
    source = JsonLinesHistory(path)
    parsed = _counting_loads(monkeypatch)
    search = HistoryRequest(
        subscription_id="0", kind=Kind.SEARCH,
        topic=Topic(namespace="_", entity_name="_", group="things", channel="twin",
                    criterion="search", action="subscribe"),
        options=SearchOptions(), headers=Headers(),
    )
    pages = [list(source.open(search)) for _ in range(3)]
    assert pages[0] == pages[1] == pages[2] and pages[0]
    lines = sum(1 for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#"))
    assert parsed[0] == lines  # the first search only
