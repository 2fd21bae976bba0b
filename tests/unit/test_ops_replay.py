from pipeline.ops.replay import OffsetMove, describe_move, plan_moves, replay_tag


def test_moves_are_clamped_to_what_the_partition_holds() -> None:
    moves = plan_moves({("t", 0): 50, ("t", 1): None}, {("t", 0): 5, ("t", 1): 900}, {("t", 0): (10, 100), ("t", 1): (0, 40)})
    assert moves == [OffsetMove("t", 0, 50, 10), OffsetMove("t", 1, None, 40)]
    assert describe_move(moves[0]) == "t[0]: 50 -> 10 (-40)" and describe_move(moves[1]) == "t[1]: none -> 40"
    assert moves[0].changes and not OffsetMove("t", 2, 7, 7).changes
    assert replay_tag(3) == "gen3"
