"""Channels between a stream's workers (hatrick.peers): one kept connection per sender, in order."""
import queue

import pytest

from gopher.channel import RunKey
from hatrick.peers import Mailbox, Outbox


def test_a_senders_payloads_arrive_in_order_over_one_kept_connection():
    key = RunKey.fresh(frames=True)
    opened = []

    class Counted(Mailbox):
        def _read(self, channel):
            opened.append(channel)
            super()._read(channel)

    mailbox = Counted("127.0.0.1", key)
    first, second = Outbox(mailbox.address, key, "t-1"), Outbox(mailbox.address, key, "t-2")
    try:
        for i in range(50):
            first.put(b"a%d" % i)
            second.put(b"b%d" % i)
        got = [bytes(mailbox.get(10.0)) for _ in range(100)]
        assert [p for p in got if p[:1] == b"a"] == [b"a%d" % i for i in range(50)]
        assert [p for p in got if p[:1] == b"b"] == [b"b%d" % i for i in range(50)]
        assert len(opened) == 2                          # one connection per sender, not one per payload
        first.put(b"last")
        first.close()                                    # close sends what is queued first
        assert bytes(mailbox.get(10.0)) == b"last"
        with pytest.raises(queue.Empty):
            mailbox.get(0.2)
    finally:
        second.close()
        mailbox.close()


def test_a_payload_to_a_worker_that_is_gone_is_dropped_with_a_message_and_close_returns(capsys):
    key = RunKey.fresh(frames=False)
    gone = Mailbox("127.0.0.1", key)
    address = gone.address
    gone.close()                                         # nobody listens there any more
    outbox = Outbox(address, key, "t-gone")
    outbox.put(b"lost")
    outbox.close()
    assert "was not sent" in capsys.readouterr().err
