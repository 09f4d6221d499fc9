"""RPC between trainers, samplers and graph servers: framing, typed messages, the client pool, ip_config."""
