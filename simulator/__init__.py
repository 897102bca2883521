"""simulator: a discrete-event model of decode costs and worker scheduling that drives dynbsz's packer."""
