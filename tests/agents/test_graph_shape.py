"""`agents.threads.graph_shape`: a compiled graph described as LangGraph's server describes it."""

from __future__ import annotations

import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from agents.threads.graph_shape import drawable_graph, schemas, subgraph_schemas


class Inner(TypedDict):
    notes: Annotated[list[str], operator.add]


class Outer(TypedDict):
    notes: Annotated[list[str], operator.add]
    topic: str


def _graph():  # type: ignore[no-untyped-def]
    inner = StateGraph(Inner)
    inner.add_node("jot", lambda state: {"notes": ["jotted"]})
    inner.add_edge(START, "jot")
    inner.add_edge("jot", END)
    outer = StateGraph(Outer)
    outer.add_node("plan", lambda state: {"notes": ["planned"]})
    outer.add_node("research", inner.compile())
    outer.add_edge(START, "plan")
    outer.add_edge("plan", "research")
    outer.add_edge("research", END)
    return outer.compile(name="outer")


def test_the_drawn_graph_has_nodes_and_edges_and_xray_opens_subgraphs() -> None:
    graph = _graph()
    flat = drawable_graph(graph, False)
    assert [n["id"] for n in flat["nodes"]] == ["__start__", "plan", "research", "__end__"]
    assert {(e["source"], e["target"]) for e in flat["edges"]} == {
        ("__start__", "plan"),
        ("plan", "research"),
        ("research", "__end__"),
    }
    assert all("id" not in n.get("data", {}) for n in flat["nodes"] if isinstance(n.get("data"), dict))
    opened = [n["id"] for n in drawable_graph(graph, True)["nodes"]]
    assert "research:jot" in opened


def test_schemas_and_each_subgraphs_schemas() -> None:
    graph = _graph()
    found = schemas(graph)
    assert set(found) == {"input_schema", "output_schema", "state_schema", "config_schema", "context_schema"}
    assert set(found["state_schema"]["properties"]) == {"notes", "topic"}
    assert found["state_schema"]["title"].startswith("outer")  # named after the graph, as LangGraph does
    assert set(found["input_schema"]["properties"]) == {"notes", "topic"}
    subgraphs = subgraph_schemas(graph, None, False)
    assert list(subgraphs) == ["research"]
    assert set(subgraphs["research"]["state_schema"]["properties"]) == {"notes"}
    assert subgraph_schemas(graph, "elsewhere", False) == {}
