"""The lab on top of the p2pnode daemon: experiments, local clusters, the LAN testbed, following
metrics, and merging what many processes report."""
