# Writes ecn_ecmp.stf: expected packets computed here, independently of softswitch
# (the Internet checksum and CRC-16/ARC of reference.py). Run: python3 generators/ecn_ecmp.py > ecn_ecmp.stf
from reference import crc16_arc, csum
def ip(tos, ttl, src, dst, proto=17):
    h=bytearray([0x45,tos,0,28,0,1,0,0,ttl,proto,0,0])+bytes(src)+bytes(dst)
    c=csum(h); h[10]=c>>8; h[11]=c&0xff
    return h
eth_in = bytes.fromhex("000000000001"+"000000000002"+"0800")
nhops = {0: (0x0000000a0a0a, [192,168,0,10], 2), 1: (0x0000000b0b0b, [192,168,0,11], 3)}
print("# ECMP: the next hop is crc16(src, dst, protocol, srcPort, dstPort) % 2, computed for each")
print("# flow by an independent CRC-16/ARC (the generator's, not softswitch's). ECN: every queue")
print("# sends 10 packets/s, so packets sent at once queue: the first leaves at once, the next waits")
print("# alone, and from the one with 2 packets ahead of it (enq_qdepth >= 2) on, ECT(0) becomes CE.")
print("add MyIngress.ecmp_group hdr.ipv4.dstAddr:0x0a000000/8 MyIngress.set_ecmp_select(ecmp_base:0, ecmp_count:2)")
for sel,(mac,ipaddr,port) in nhops.items():
    print(f"add MyIngress.ecmp_nhop meta.ecmp_select:{sel} MyIngress.set_nhop(nhop_dmac:{mac:#x}, nhop_ipv4:0x{bytes(ipaddr).hex()}, port:{port})")
print("set_queue_rate 10")
src=[10,1,0,1]; dst=[10,2,0,2]
flows=[1000,1001,1002,1003,1000,1000,1000]
expects={2:[],3:[]}
for sp in flows:
    dp=4791
    ports=sp.to_bytes(2,'big')+dp.to_bytes(2,'big')
    sel=crc16_arc(bytes(src)+bytes(dst)+bytes([17])+ports)%2
    mac,nip,port=nhops[sel]
    pin = eth_in+ip(0x02,64,src,dst)+ports+b"\xca\xfe"
    print(f"packet 1 {pin.hex()}")
    n=len(expects[port])
    ecn = 3 if n>=3 else 2
    pout = mac.to_bytes(6,'big')+bytes.fromhex("000000000002")+b"\x08\x00"+ip(ecn,63,src,nip)+ports+b"\xca\xfe"
    expects[port].append(pout)
for port,l in expects.items():
    for p in l:
        print(f"expect {port} {p.hex()} $")
print("# A TTL of 0 is dropped in ingress.")
print(f"packet 1 {(eth_in+ip(0x02,0,src,dst)+(5000).to_bytes(2,'big')+(1).to_bytes(2,'big')).hex()}")
