# A small profile for tacl-plan: 8 ranks at 10 Gbit/s (alpha-beta lines),
# a 40 ms forward pass and eight tensors in gradient-ready order.
forward 0.040
comm 8 30e-6 1.4e-9 5.6e-9
#     name enc_fixed enc_per_byte dec_fixed dec_per_byte ratio summable
codec fp16 20e-6    5e-11        20e-6     5e-11        0.5   1
codec topk 200e-6   5e-10        30e-6     5e-11        0.02  0
# topk's smallest group (64 KiB is its default too): smaller ones go dense
min_bytes topk 65536
tensor 4096     0.0001
tensor 9437184  0.004
tensor 4096     0.0001
tensor 2359296  0.002
tensor 2048     0.0001
tensor 589824   0.001
tensor 1024     0.0001
tensor 37748736 0.012
