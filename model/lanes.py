"""Keys the unroller (compile.py) puts in an agent's environment: inside a warp region, and on a
branch that splits a warp by its lane index (not identifiers, so no name can clash)."""

IN_WARP_REGION = "·warp-region"
LANES_SPLIT = "·lanes-split"
LANE = "lane"           # the lane index a kernel may branch on


def lane_split(cond_vars: set[str]) -> bool:
    """Does a branch on these names split a warp?"""
    return LANE in cond_vars
