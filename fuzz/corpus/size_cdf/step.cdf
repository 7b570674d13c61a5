# 40% of flows are 100 bytes
100 40
150 40
200 100
