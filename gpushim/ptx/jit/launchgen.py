"""Code generation of the launch functions (a mixin of codegen.Codegen): the block loop, the thread loops,
barrier rounds and tier 2's region loops, the check pass's launch function and @run."""

from __future__ import annotations

from functools import partial

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import ERR_RET, I1, I8, I32, I64, P8, P64, YIELD_RET


class LaunchOps:
    # -- the launch: block and thread loops -----------------------------------------------------------------
    def _slot(self, b: ir.IRBuilder, ctx, k: int):
        return self._invariant(b.load(b.gep(ctx, [ir.Constant(I32, k)])))

    def _block_ids(self, b: ir.IRBuilder, ctx, bi):
        gx, gy = self._slot(b, ctx, L.GRID), self._slot(b, ctx, L.GRID + 1)
        return b.urem(bi, gx), b.urem(b.udiv(bi, gx), gy), b.udiv(bi, b.mul(gx, gy))

    def _block_loop(self, f: ir.Function, b: ir.IRBuilder, ctx, body, cnt=None) -> None:
        """for bi in [BEGIN, END): body(bi) (emits the block's code, ends where the block is done); between
        blocks the watchdog flag is polled, and with cnt (the count's alloca) the YIELD flag: when set, the
        count goes to the context, BEGIN becomes the next block and the function returns YIELD_RET (the
        launch goes on in tier 2; blocks are independent). The builder ends in the block after the loop."""
        begin, end = self._slot(b, ctx, L.BEGIN), self._slot(b, ctx, L.END)
        entry = b.block
        head = f.append_basic_block("blocks")
        blk = f.append_basic_block("block")
        done = f.append_basic_block("blocks_done")
        b.branch(head)
        b.position_at_end(head)
        bi = b.phi(I64)
        bi.add_incoming(begin, entry)
        b.cbranch(b.icmp_unsigned("<", bi, end), blk, done)
        b.position_at_end(blk)
        body(bi)
        flag = b.load_atomic(b.gep(ctx, [ir.Constant(I32, L.ABORT)]), "monotonic", 8)
        stop = f.append_basic_block("stop")
        cont = f.append_basic_block("cont")
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I64, 0)), stop, cont)
        b.position_at_end(cont)
        nxt = b.add(bi, ir.Constant(I64, 1))
        if cnt is not None:
            flag = b.load_atomic(b.gep(ctx, [ir.Constant(I32, L.YIELD)]), "monotonic", 8)
            yld = f.append_basic_block("yield")
            go = f.append_basic_block("next_block")
            b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I64, 0)), yld, go).set_weights([1, 1 << 20])
            b.position_at_end(yld)
            b.store(b.load(cnt), b.gep(ctx, [ir.Constant(I32, L.COUNT)]))
            b.store(nxt, b.gep(ctx, [ir.Constant(I32, L.BEGIN)]))
            b.ret(ir.Constant(I32, YIELD_RET))
            b.position_at_end(go)
        bi.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(stop)
        b.store(ir.Constant(I64, Err.LAUNCH_TIMEOUT), b.gep(ctx, [ir.Constant(I32, L.ERR)]))
        site = self._site(Err.LAUNCH_TIMEOUT, "watchdog")
        b.store(ir.Constant(I64, site), b.gep(ctx, [ir.Constant(I32, L.ERR_SITE)]))
        b.store(bi, b.gep(ctx, [ir.Constant(I32, L.ERR_BLOCK)]))
        b.ret(ir.Constant(I32, ERR_RET))
        b.position_at_end(done)

    def _thread_nest(self, f: ir.Function, b: ir.IRBuilder, ctx, call, failed: ir.Block) -> None:
        """for tz, ty, tx: call(t, tx, ty, tz) -> i32, to `failed` when it returns ERR_RET. Three counted loops,
        x innermost: the form LLVM's loop vectoriser takes."""
        bx, by, bz = (self._slot(b, ctx, L.BLOCK + i) for i in range(3))
        one = ir.Constant(I64, 1)
        zero = ir.Constant(I64, 0)
        pre = b.block
        hz, hy, hx = (f.append_basic_block(n) for n in ("tz", "ty", "tx"))
        ly, lz, after = (f.append_basic_block(n) for n in ("ty_next", "tz_next", "threads_done"))
        b.branch(hz)
        b.position_at_end(hz)
        tz = b.phi(I64)
        tz.add_incoming(zero, pre)
        rowz = b.mul(tz, by)
        b.branch(hy)
        b.position_at_end(hy)
        ty = b.phi(I64)
        ty.add_incoming(zero, hz)
        row = b.mul(b.add(rowz, ty), bx)
        b.branch(hx)
        b.position_at_end(hx)
        tx = b.phi(I64)
        tx.add_incoming(zero, hy)
        r = call(b.add(row, tx), tx, ty, tz)
        ok = f.append_basic_block("thread_ok")
        b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, ERR_RET)), failed, ok)
        b.position_at_end(ok)
        tx1 = b.add(tx, one)
        tx.add_incoming(tx1, ok)
        b.cbranch(b.icmp_unsigned("<", tx1, bx), hx, ly)
        b.position_at_end(ly)
        ty1 = b.add(ty, one)
        ty.add_incoming(ty1, ly)
        b.cbranch(b.icmp_unsigned("<", ty1, by), hy, lz)
        b.position_at_end(lz)
        tz1 = b.add(tz, one)
        tz.add_incoming(tz1, lz)
        b.cbranch(b.icmp_unsigned("<", tz1, bz), hz, after)
        b.position_at_end(after)

    def _thread_loop(self, f: ir.Function, b: ir.IRBuilder, ctx, call, failed: ir.Block, tpb) -> None:
        """The threads of a block as one loop (tier 1's exact code: nothing there to vectorise, and one loop
        costs LLVM less to compile than _thread_nest's three): for t in [0, tpb): call(t, tx, ty, tz) -> i32, to
        `failed` when it returns ERR_RET; ty and tz move on in a block of their own when tx wraps."""
        bx, by = self._slot(b, ctx, L.BLOCK), self._slot(b, ctx, L.BLOCK + 1)
        one = ir.Constant(I64, 1)
        zero = ir.Constant(I64, 0)
        pre = b.block
        head, ok, wrap, after = (f.append_basic_block(n) for n in ("thr", "thread_ok", "tx_wrap", "threads_done"))
        b.branch(head)
        b.position_at_end(head)
        t, tx, ty, tz = b.phi(I64), b.phi(I64), b.phi(I64), b.phi(I64)
        for v in (t, tx, ty, tz):
            v.add_incoming(zero, pre)
        r = call(t, tx, ty, tz)
        b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, ERR_RET)), failed, ok)
        b.position_at_end(ok)
        t1 = b.add(t, one)
        tx1 = b.add(tx, one)
        b.cbranch(b.icmp_unsigned("<", tx1, bx), head, wrap)
        for v, nv in ((t, t1), (tx, tx1), (ty, ty), (tz, tz)):
            v.add_incoming(nv, ok)
        b.position_at_end(wrap)
        ty1 = b.add(ty, one)
        wy = b.icmp_unsigned("==", ty1, by)
        for v, nv in ((t, t1), (tx, zero), (ty, b.select(wy, zero, ty1)), (tz, b.select(wy, b.add(tz, one), tz))):
            v.add_incoming(nv, wrap)
        b.cbranch(b.icmp_unsigned("<", t1, tpb), head, after)
        b.position_at_end(after)

    def _private_copies(self, b: ir.IRBuilder, ctx):
        """Copies of the context and of the named parameters in the launch function's frame: no store of the
        kernel can reach them, so their loads are loop invariants (kernel memory is reached through pointers
        LLVM cannot tell apart from the context)."""
        false = ir.Constant(I1, 0)
        kc = b.bitcast(b.alloca(ir.ArrayType(I64, L.SLOTS), name="kc"), P64)
        b.call(self.i_memcpy, [b.bitcast(kc, P8), b.bitcast(ctx, P8), ir.Constant(I64, 8 * L.SLOTS), false])
        nbytes = max(self.prog.param_bytes, 1)
        kp = b.bitcast(b.alloca(ir.ArrayType(I64, (nbytes + 7) // 8), name="kp"), P8)
        param = b.inttoptr(self._slot(b, ctx, L.PARAM), P8)
        if self.prog.param_bytes:
            b.call(self.i_memcpy, [kp, param, ir.Constant(I64, self.prog.param_bytes), false])
        return kc, kp

    def _poll_round(self, b: ir.IRBuilder, ctx, bi, stop: ir.Block) -> None:
        """The watchdog between barrier rounds (cycles through barriers have no poll of their own)."""
        flag = b.load_atomic(b.gep(ctx, [ir.Constant(I32, L.ABORT)]), "monotonic", 8)
        go = b.function.append_basic_block("round_go")
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I64, 0)), stop, go)
        b.position_at_end(go)

    def _region_rounds(self, f, b, ctx, thread, ids, bufs, state, nres: int, blocks, accs) -> None:
        """Rounds in which every thread of the block resumes at the same point k: a loop over the threads with
        k a constant (after inlining, the code of that barrier region alone, which LLVM can vectorise over the
        threads). When the threads stop at different points, the general rounds (`rnd`) take over."""
        cx, cy, cz, bi = ids
        cache, cnt, kc, kp = bufs
        rnd, blk_next, stop, failed = blocks
        mn_a, mx_a = accs
        pre = b.block
        head = f.append_basic_block("region_round")
        join = f.append_basic_block("region_done")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I32)
        k.add_incoming(ir.Constant(I32, 0), pre)
        self._poll_round(b, ctx, bi, stop)
        sw = b.switch(k, rnd)
        ends = []
        for j in range(nres):
            rb = f.append_basic_block(f"region{j}")
            sw.add_case(ir.Constant(I32, j), rb)
            b.position_at_end(rb)
            b.store(ir.Constant(I32, 2**31 - 1), mn_a)
            b.store(ir.Constant(I32, -(2**31)), mx_a)

            def call(t, tx, ty, tz, j=j):
                r = b.call(thread, [ctx, t, ir.Constant(I32, j), cx, cy, cz, bi, tx, ty, tz, cache, cnt, kc, kp])
                st = b.select(b.icmp_signed("==", r, ir.Constant(I32, 0)), ir.Constant(I32, -1), r)
                self._tag(b.store(st, b.gep(state, [t])), "state")
                mn, mx = b.load(mn_a), b.load(mx_a)
                b.store(b.select(b.icmp_signed("<", st, mn), st, mn), mn_a)
                b.store(b.select(b.icmp_signed(">", st, mx), st, mx), mx_a)
                return r

            self._thread_nest(f, b, ctx, call, failed)
            ends.append((b.load(mn_a), b.load(mx_a), b.block))
            b.branch(join)
        b.position_at_end(join)
        mn, mx = b.phi(I32), b.phi(I32)
        for lo, hi, blk in ends:
            mn.add_incoming(lo, blk)
            mx.add_incoming(hi, blk)
        more = f.append_basic_block("region_more")
        b.cbranch(b.icmp_signed("<", mx, ir.Constant(I32, 0)), blk_next, more)  # all exited
        b.position_at_end(more)
        same = f.append_basic_block("region_same")
        b.cbranch(b.icmp_signed("==", mn, mx), same, rnd)
        b.position_at_end(same)
        k.add_incoming(mn, same)
        b.branch(head)

    def _launch_fn(self, name: str, thread: ir.Function, ncache: int, barriers: bool,
                   regions: int = 0, yieldable: bool = False, vectorise: bool = False) -> ir.Function:
        """@name(ctx) -> 0, or ERR_RET with the fault in the context: every block of the launch, with `thread`
        (exact or fast mode) for each thread: once each without barriers, else round after round, each thread
        from where it stopped, until all exited (COX/CuPBoP's barrier regions). yieldable: YIELD_RET between
        blocks when the YIELD flag is set (_block_loop). vectorise: threads without barriers in _thread_nest's
        loops, which LLVM's loop vectoriser takes (tier 2's fast code), else in one loop (_thread_loop)."""
        f = ir.Function(self.m, ir.FunctionType(I32, [P64]), name=name)
        f.linkage = "internal"
        f.attributes.add("alwaysinline")  # into @run: one function less for LLVM to compile
        (ctx,) = f.args
        b = ir.IRBuilder(f.append_basic_block("e"))
        # per global access site (or sites of one base, ops_mem._global_ptr), the allocation it hit last, from
        # thread to thread, as (lo, n); empty (n = 0) at the start of a launch: the first access searches
        cache = b.bitcast(b.alloca(ir.ArrayType(I64, 2 * max(ncache, 1)), name="acache"), P64)
        for k in range(ncache):
            b.store(ir.Constant(I64, 1), b.gep(cache, [ir.Constant(I64, 2 * k)]))
            b.store(ir.Constant(I64, 0), b.gep(cache, [ir.Constant(I64, 2 * k + 1)]))
        cnt = b.alloca(I64, name="count")
        b.store(ir.Constant(I64, 0), cnt)
        kc, kp = self._private_copies(b, ctx)
        mn_a, mx_a = b.alloca(I32, name="state_min"), b.alloca(I32, name="state_max")
        failed = f.append_basic_block("failed")
        p = self.prog
        bx, by, bz = (self._slot(b, ctx, L.BLOCK + i) for i in range(3))
        tpb = b.mul(b.mul(bx, by), bz)
        false = ir.Constant(I1, 0)

        def block(bi):
            cx, cy, cz = self._block_ids(b, ctx, bi)
            if p.shared or p.dynamic_shared:
                shbuf = b.inttoptr(self._slot(b, ctx, L.SHBUF), P8)
                b.call(self.i_memset, [shbuf, ir.Constant(I8, 0), self._slot(b, ctx, L.SHSIZE), false])
            if p.frame_bytes:
                lobuf = b.inttoptr(self._slot(b, ctx, L.LOBUF), P8)
                lobytes = b.mul(tpb, self._slot(b, ctx, L.LOSTRIDE))
                b.call(self.i_memset, [lobuf, ir.Constant(I8, 0), lobytes, false])
            if not barriers:  # each thread once, from its start to its exit
                loop = self._thread_nest if vectorise else partial(self._thread_loop, tpb=tpb)
                loop(f, b, ctx, lambda t, tx, ty, tz: b.call(
                    thread, [ctx, t, ir.Constant(I32, 0), cx, cy, cz, bi, tx, ty, tz, cache, cnt, kc, kp]), failed)
                return
            state = b.inttoptr(self._slot(b, ctx, L.STATE), I32.as_pointer())
            b.call(self.i_memset, [b.bitcast(state, P8), ir.Constant(I8, 0), b.mul(tpb, ir.Constant(I64, 4)), false])
            rnd = f.append_basic_block("round")
            blk_next = f.append_basic_block("block_next")
            stop = f.append_basic_block("stop_round")
            if any(form != (0, -1, False) for form in self.bar_info.values()):  # ids, counts, arrive: namedbar
                self._named_rounds(f, b, ctx, thread, (cx, cy, cz, bi), (cache, cnt, kc, kp), state,
                                   (blk_next, stop, failed))
                self._rounds_tail(b, ctx, bi, rnd, stop, blk_next)
                return
            if getattr(self, "coll_at", None) or getattr(self, "red_at", None):  # collectives, bar.red: ops_warp
                self._coll_rounds(f, b, ctx, thread, (cx, cy, cz, bi), (cache, cnt, kc, kp), state,
                                  (blk_next, stop, failed), regions)
                self._rounds_tail(b, ctx, bi, rnd, stop, blk_next)
                return
            if regions:
                self._region_rounds(f, b, ctx, thread, (cx, cy, cz, bi), (cache, cnt, kc, kp), state, regions,
                                    (rnd, blk_next, stop, failed), (mn_a, mx_a))
            thr = f.append_basic_block("thr")
            run_t = f.append_basic_block("run_t")
            nxt_t = f.append_basic_block("next_t")
            rnd_end = f.append_basic_block("round_end")
            if not b.block.is_terminated:
                b.branch(rnd)
            b.position_at_end(rnd)
            self._poll_round(b, ctx, bi, stop)
            rgo = b.block
            b.branch(thr)
            b.position_at_end(thr)
            t = b.phi(I64)
            live = b.phi(I1)
            tx, ty, tz = b.phi(I64), b.phi(I64), b.phi(I64)
            for v in (t, tx, ty, tz):
                v.add_incoming(ir.Constant(I64, 0), rgo)
            live.add_incoming(false, rgo)
            sp = b.gep(state, [t])
            s = self._tag(b.load(sp), "state")  # threads that exited are skipped; the others resume where they stopped
            b.cbranch(b.icmp_signed("<", s, ir.Constant(I32, 0)), nxt_t, run_t)
            b.position_at_end(run_t)
            r = b.call(thread, [ctx, t, s, cx, cy, cz, bi, tx, ty, tz, cache, cnt, kc, kp])
            ok_t = f.append_basic_block("ok_t")
            b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, ERR_RET)), failed, ok_t)
            b.position_at_end(ok_t)
            exited = b.icmp_signed("==", r, ir.Constant(I32, 0))
            self._tag(b.store(b.select(exited, ir.Constant(I32, -1), r), sp), "state")
            live2 = b.or_(live, b.not_(exited))
            b.branch(nxt_t)
            b.position_at_end(nxt_t)
            lv = b.phi(I1)
            lv.add_incoming(live, thr)
            lv.add_incoming(live2, ok_t)
            t2 = b.add(t, ir.Constant(I64, 1))
            t.add_incoming(t2, nxt_t)
            one = ir.Constant(I64, 1)
            zero = ir.Constant(I64, 0)
            tx1 = b.add(tx, one)
            wx = b.icmp_unsigned("==", tx1, bx)
            ty1 = b.select(wx, b.add(ty, one), ty)
            wy = b.icmp_unsigned("==", ty1, by)
            tx.add_incoming(b.select(wx, zero, tx1), nxt_t)
            ty.add_incoming(b.select(wy, zero, ty1), nxt_t)
            tz.add_incoming(b.select(wy, b.add(tz, one), tz), nxt_t)
            live.add_incoming(lv, nxt_t)
            b.cbranch(b.icmp_unsigned("<", t2, tpb), thr, rnd_end)
            b.position_at_end(rnd_end)
            b.cbranch(lv, rnd, blk_next)
            b.position_at_end(stop)
            self._stop_block(b, ctx, bi)
            b.position_at_end(blk_next)

        self._block_loop(f, b, ctx, block, cnt if yieldable else None)
        b.store(b.load(cnt), b.gep(ctx, [ir.Constant(I32, L.COUNT)]))
        b.ret(ir.Constant(I32, 0))
        b.position_at_end(failed)
        b.ret(ir.Constant(I32, ERR_RET))
        return f

    def _resume(self, f, b: ir.IRBuilder, ctx, thread, t, s, ids, bufs, dims, failed: ir.Block, name: str,
                tids=None):
        """Calls thread t of the block from resume point s (dims: the block's x and y sizes, for its ids, unless
        the caller counts them on: tids); the result: 0 exited, k stopped at resume point k (a fault branches to
        failed)."""
        cx, cy, cz, bi = ids
        cache, cnt, kc, kp = bufs
        bx, by = dims
        if tids is not None:
            tx, ty, tz = tids
        else:
            tx = b.urem(t, bx)
            ty = b.urem(b.udiv(t, bx), by)
            tz = b.udiv(t, b.mul(bx, by))
        r = b.call(thread, [ctx, t, s, cx, cy, cz, bi, tx, ty, tz, cache, cnt, kc, kp])
        ok = f.append_basic_block(name)
        b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, ERR_RET)), failed, ok)
        b.position_at_end(ok)
        return r

    def _rounds_tail(self, b: ir.IRBuilder, ctx, bi, rnd: ir.Block, stop: ir.Block, blk_next: ir.Block) -> None:
        """After ops_warp's or namedbar's rounds: the general rounds' entry unused, the watchdog's stop."""
        b.position_at_end(rnd)
        b.unreachable()
        b.position_at_end(stop)
        self._stop_block(b, ctx, bi)
        b.position_at_end(blk_next)

    def _stop_block(self, b: ir.IRBuilder, ctx, bi) -> None:
        """The watchdog stopped the launch between rounds."""
        b.store(ir.Constant(I64, Err.LAUNCH_TIMEOUT), b.gep(ctx, [ir.Constant(I32, L.ERR)]))
        site = self._site(Err.LAUNCH_TIMEOUT, "watchdog")
        b.store(ir.Constant(I64, site), b.gep(ctx, [ir.Constant(I32, L.ERR_SITE)]))
        b.store(bi, b.gep(ctx, [ir.Constant(I32, L.ERR_BLOCK)]))
        b.ret(ir.Constant(I32, ERR_RET))

    def _check_fn(self, thread: ir.Function, sites: list[int]) -> ir.Function:
        """@run_check(ctx) -> 0 when no access of the launch would fail (every thread run in check mode, before
        anything ran), 1 when one may, ERR_RET when the watchdog stopped it (the context says so)."""
        f = ir.Function(self.m, ir.FunctionType(I32, [P64]), name="run_check")
        f.linkage = "internal"
        (ctx,) = f.args
        b = ir.IRBuilder(f.append_basic_block("e"))
        n = 1 + 3 * len(sites)
        acc = b.bitcast(b.alloca(ir.ArrayType(I64, n), name="acc"), P64)
        for k in range(n):  # flag, then (min, max, or) per global access
            init = 2**64 - 1 if k % 3 == 1 else 0
            b.store(ir.Constant(I64, init), b.gep(acc, [ir.Constant(I64, k)]))
        cnt = b.alloca(I64, name="count")
        b.store(ir.Constant(I64, 0), cnt)
        kc, kp = self._private_copies(b, ctx)
        failed = f.append_basic_block("failed")

        def block(bi):
            cx, cy, cz = self._block_ids(b, ctx, bi)
            self._thread_nest(f, b, ctx, lambda t, tx, ty, tz: b.call(
                thread, [ctx, t, ir.Constant(I32, 0), cx, cy, cz, bi, tx, ty, tz, acc, cnt, kc, kp]), failed)

        self._block_loop(f, b, ctx, block)
        ok = b.icmp_unsigned("==", b.load(acc), ir.Constant(I64, 0))
        for k, size in enumerate(sites):
            lo, hi, bits = (b.load(b.gep(acc, [ir.Constant(I64, 1 + 3 * k + j)])) for j in range(3))
            used = b.icmp_unsigned("<=", lo, hi)
            yes = f.append_basic_block()
            join = f.append_basic_block()
            pre = b.block
            b.cbranch(used, yes, join)
            b.position_at_end(yes)
            found = b.call(self.find_alloc, [ctx, lo, b.add(hi, ir.Constant(I64, size))])
            good = b.extract_value(found, 0)
            if size > 1:
                aligned = b.icmp_unsigned("==", b.and_(bits, ir.Constant(I64, size - 1)), ir.Constant(I64, 0))
                good = b.and_(good, aligned)
            yes_end = b.block
            b.branch(join)
            b.position_at_end(join)
            g = b.phi(I1)
            g.add_incoming(ir.Constant(I1, 1), pre)
            g.add_incoming(good, yes_end)
            ok = b.and_(ok, g)
        b.ret(b.select(ok, ir.Constant(I32, 0), ir.Constant(I32, 1)))
        b.position_at_end(failed)
        b.ret(ir.Constant(I32, ERR_RET))
        return f

    def _run_fn(self, inner: ir.Function, check: ir.Function | None = None) -> None:
        """@run(ctx) -> 0; 1 with the fault in the context; 2 (tier 2 only) when the check pass found an access
        that may fail: the caller then runs tier 1's exact code, which reports the fault as the interpreter;
        3 (tier 1 only) when it stopped between blocks for tier 2 (YIELD: BEGIN is the next block, COUNT the
        count so far)."""
        f = ir.Function(self.m, ir.FunctionType(I32, [P64]), name="run")
        (ctx,) = f.args
        b = ir.IRBuilder(f.append_basic_block("e"))
        one = ir.Constant(I32, 1)
        zero = ir.Constant(I32, 0)
        if check is not None:
            go = f.append_basic_block("go")
            do_check = f.append_basic_block("check")
            skip = b.load(b.gep(ctx, [ir.Constant(I32, L.SKIPCHECK)]))
            b.cbranch(b.icmp_unsigned("!=", skip, ir.Constant(I64, 0)), go, do_check)
            b.position_at_end(do_check)
            r = b.call(check, [ctx])
            other = f.append_basic_block("not_go")
            b.cbranch(b.icmp_signed("==", r, zero), go, other)
            b.position_at_end(other)  # stopped by the watchdog (1), or an access may fail (2)
            b.ret(b.select(b.icmp_signed("==", r, ir.Constant(I32, ERR_RET)), one, ir.Constant(I32, 2)))
            b.position_at_end(go)
        r = b.call(inner, [ctx])
        rc = b.select(b.icmp_signed("==", r, ir.Constant(I32, ERR_RET)), one, zero)
        b.ret(b.select(b.icmp_signed("==", r, ir.Constant(I32, YIELD_RET)), ir.Constant(I32, 3), rc))
