"""Hand-overs between an upstream connection's tasks: no spare loop turns, same semantics."""

from __future__ import annotations

import anyio
from anyio import wait_all_tasks_blocked
from bridge_core.proxy._handoff import EagerSend, handed_over, items, taken


async def test_an_item_for_a_waiting_receiver_goes_without_yielding(anyio_backend: str) -> None:
    send, receive = anyio.create_memory_object_stream[int](0)
    got: list[int] = []
    others: list[str] = []

    async def receiver() -> None:
        got.append(await receive.receive())

    async def other() -> None:
        others.append("ran")

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)
        await wait_all_tasks_blocked()
        tg.start_soon(other)  # runs at the sender's next loop turn
        await handed_over(send, 1)
        assert others == []  # the hand-over took no turn
    assert got == [1]


async def test_with_nobody_waiting_each_side_waits_for_the_other(anyio_backend: str) -> None:
    send, receive = anyio.create_memory_object_stream[int](0)
    got: list[int] = []

    async def receiver() -> None:
        await wait_all_tasks_blocked()
        got.append(await taken(receive))  # the sender waits: taken at once
        got.append(await taken(receive))  # nobody waits: waits for the sender

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)
        await handed_over(send, 1)  # nobody waits yet: waits for the receiver
        await wait_all_tasks_blocked()
        await handed_over(send, 2)
    assert got == [1, 2]


async def test_items_end_with_the_stream_and_eager_send_closes_it(anyio_backend: str) -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    eager = EagerSend(send)
    async with eager:
        await eager.send(7)
    assert [item async for item in items(receive)] == [7]
