# A tiny profile for the replay harness' test: six tensors in
# gradient-ready order, a 2 ms forward pass (rescaled by --ratio).
forward 0.002
tensor 4096     0.0002  # bias
tensor 262144   0.0010  # weight
tensor 1024     0.0001
tensor 1048576  0.0020
tensor 8192     0.0002
tensor 2097152  0.0030
