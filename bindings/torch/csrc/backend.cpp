/*
 * The torch.distributed backend "tacl": a c10d::Backend whose collectives
 * are tacl's calls, on CPU tensors and (built with CUDA) CUDA tensors.
 *
 * An operation torch waits for at once (asyncOp false, the default of
 * every torch.distributed call) runs to its end in the calling thread,
 * as a blocking tacl call, and returns a completed TaclWork (run_here).
 * Any other starts one tacl request (several calls become one request
 * through tacl_group_start/end_nb) and returns a TaclWork that owns it.
 * A Work's future must complete without anyone calling wait
 * (DDP chains its gradient buckets on them), so every communicator runs
 * with the library's progress thread, and each request's completion
 * callback (tacl_request_set_callback) hands its work to a completion
 * thread of this module, shared by every communicator of the process.
 * That thread sleeps until a callback wakes it: it never polls, so it
 * takes no core from the ranks that move the data (a polling thread here
 * used 2-5 ms of CPU per 64 MB collective on an oversubscribed node, see
 * docs/bench/torch.md).
 * Whoever finishes a request first, that thread or a caller of wait(),
 * runs the Work's epilogue (copies into non-contiguous or list outputs)
 * and marks its future.
 *
 * CUDA tensors (TACL_TORCH_CUDA, defined when torch has CUDA) go to the
 * same communicator, ordered on torch's current stream of their device,
 * as ProcessGroupNCCL's: the operation is tacl's _nb call on that stream,
 * which the stream then waits for (tacl joins it), so nothing waits on
 * the host.  Right after the call the work enqueues its epilogue on the
 * stream, records an event there and completes its future, which torch
 * makes CUDA-aware (its waiters wait for that event on their streams);
 * wait() makes the caller's current stream wait for the event.  The
 * request still completes through the callback, which keeps the tensors
 * alive until tacl is done with them and records a failure.  The device
 * of a tensor must be the communicator's (the current device when it was
 * made: set it before init_process_group, as for NCCL).
 *
 * Point-to-point keeps torch's tags (tacl_send_tag/tacl_recv_tag) and
 * receives from any source (the work's sourceRank() says who sent).
 * What tacl cannot serve (other devices, dtypes tacl lacks) raises an
 * error that names it.
 */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

#ifdef TACL_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include "compress.h"

namespace py = pybind11;

namespace tacl_torch {

using c10d::OpType;
using c10d::ReduceOp;
using Ms = std::chrono::milliseconds;

/*
 * Drops the GIL for a blocking call when this thread holds it: the
 * constructors run from Python (holding it) and from c10d's split (which
 * may not).
 */
struct NoGil {
    PyThreadState *saved = PyGILState_Check() ? PyEval_SaveThread() : nullptr;
    NoGil() = default;
    NoGil(const NoGil &) = delete;
    NoGil &operator=(const NoGil &) = delete;
    ~NoGil()
    {
        if (saved != nullptr)
            PyEval_RestoreThread(saved);
    }
};

/* ---- errors ---- */

/*
 * tacl's own message for a failed call on comm: the communicator's last
 * error, else the thread's, else the status string.
 */
std::string tacl_message(tacl_comm_t comm, tacl_status_t s)
{
    const char *m = comm != nullptr ? tacl_comm_last_error(comm) : nullptr;
    if (m == nullptr || *m == '\0')
        m = tacl_last_error();
    if (m == nullptr || *m == '\0')
        m = tacl_status_string(s);
    return std::string(m) + " [" + tacl_status_string(s) + "]";
}

[[noreturn]] static void fail(const std::string &what, tacl_comm_t comm,
                              tacl_status_t s)
{
    C10_THROW_ERROR(DistBackendError, "tacl: " + what + ": " +
                                          tacl_message(comm, s));
}

[[noreturn]] static void unsupported(const std::string &what)
{
    TORCH_CHECK_NOT_IMPLEMENTED(false, "tacl backend: ", what);
}

/* ---- the communicator, shared by a backend and its works ---- */

struct Comm {
    tacl_comm_t comm = nullptr;
    std::atomic<bool> aborted{false}; /* aborted or destroyed */
    std::atomic<bool> shut{false};    /* shut down: no new operations */
    Ms timeout{0};                    /* the group's */

    ~Comm()
    {
        if (comm != nullptr && !aborted.load())
            tacl_comm_destroy(comm);
    }
};

/* ---- where an operation runs ---- */

/*
 * The memory of an operation: host, or a CUDA device with torch's
 * current stream there (what tacl orders the call on).
 */
struct Place {
    bool cuda = false;
    c10::DeviceIndex device = -1;
    void *stream = nullptr;     /* cudaStream_t; null for host memory */
};

/* The place of an operation on tensor t (undefined: host). */
static Place place_of(const at::Tensor &t)
{
    Place p;
    if (!t.defined() || !t.is_cuda())
        return p;
#ifdef TACL_TORCH_CUDA
    p.cuda = true;
    p.device = t.device().index();
    p.stream = at::cuda::getCurrentCUDAStream(p.device).stream();
#endif
    return p;
}

/*
 * One sparse all-reduce of a COO tensor t: its rows flattened (the
 * sparse dimensions make one index, the dense ones the row) as the
 * library reads them, and the result written back into t in gloo's
 * form.  Held by the work until it completes, since the _nb form reads
 * the struct and the rows and writes the result until then.
 */
struct SparseCall {
    at::Tensor t, c, lin, vals;
    int64_t sd = 0;
    tacl_sparse_t in{};
    tacl_sparse_result_t res{};

    explicit SparseCall(const at::Tensor &t_) : t(t_), c(t_.coalesce())
    {
        int64_t nrows = 1, row_len = 1;
        sd = c.sparse_dim();
        for (int64_t d = 0; d < c.dim(); d++)
            (d < sd ? nrows : row_len) *= c.size(d);
        at::Tensor idx = c._indices();
        at::Tensor l = idx[0].clone();
        for (int64_t d = 1; d < sd; d++)
            l = l * c.size(d) + idx[d];
        lin = l.contiguous();
        vals = c._values().contiguous();
        in.nrows = static_cast<size_t>(nrows);
        in.row_len = static_cast<size_t>(row_len);
        in.index_type = TACL_INT64;
        in.nnz = static_cast<size_t>(c._nnz());
        in.indices = lin.data_ptr();
        in.values = vals.data_ptr();
    }
    SparseCall(const SparseCall &) = delete;
    SparseCall &operator=(const SparseCall &) = delete;
    ~SparseCall() { tacl_sparse_result_free(&res); }

    /* The summed rows replace t's, coalesced. */
    void write_back()
    {
        int64_t nnz = static_cast<int64_t>(res.nnz);
        std::vector<int64_t> vshape{nnz};
        for (int64_t d = sd; d < c.dim(); d++)
            vshape.push_back(c.size(d));
        at::Tensor out_lin =
            at::from_blob(res.indices, {nnz}, at::kLong).clone();
        at::Tensor out_vals =
            at::from_blob(res.values, vshape, vals.options()).clone();
        tacl_sparse_result_free(&res);
        at::Tensor out_idx = at::empty({sd, nnz}, at::kLong);
        for (int64_t d = sd - 1; d >= 0; d--) {
            out_idx[d].copy_(out_lin.remainder(c.size(d)));
            out_lin = out_lin.div(c.size(d), "floor");
        }
        t.copy_(at::_sparse_coo_tensor_unsafe(out_idx, out_vals, c.sizes())
                    ._coalesced_(true));
    }
};

/* ---- works and the completion threads ---- */

class TaclWork;

/*
 * How many tacl futures' callbacks this thread is running (marking a
 * future runs them here).  A collective started meanwhile is a callback's
 * (torch's powerSGD_hook all-reduces P and Q inside its callbacks): it
 * goes to the group's callback communicator and is finished out of order.
 */
static thread_local int in_callbacks = 0;

/* While alive, this thread counts as running callbacks. */
struct InCallbacks {
    InCallbacks() { in_callbacks++; }
    ~InCallbacks() { in_callbacks--; }
    InCallbacks(const InCallbacks &) = delete;
    InCallbacks &operator=(const InCallbacks &) = delete;
};

/*
 * Threads of this process finish requests nobody waits for.  The
 * library's callback only hands the work over here (a callback must not
 * call tacl, and marking a future runs arbitrary Python); a thread,
 * asleep on the condition variable until then, finishes it.
 *
 * Callbacks start collectives, and tacl, like NCCL, matches a
 * communicator's collectives by their order, which must then be the same
 * on every rank.  NCCL's futures complete when enqueued, their callbacks
 * run in the issuing thread, in program order; here a future completes
 * when its request does, in a thread of this pool, while the main thread
 * goes on starting collectives (DDP's next buckets).  So:
 * - a callback's collectives go to a communicator of their own (the
 *   backend's callback communicator), apart from the main thread's;
 * - works the program started outside callbacks ("root" works, issued())
 *   are finished one at a time per communicator, in the order they were
 *   started, so their callbacks, and the collectives those start, come
 *   in the same order on every rank;
 * - a callback's own works ("nested") go to any free thread: a callback
 *   waits for them (powerSGD_hook does), and a thread is started when
 *   none is free, so that wait always has one to end it.
 * A root work whose predecessor's callbacks have run for the group's
 * timeout (one waiting for a later root future, say) goes anyway: no
 * wait is unbounded, and any collective that predecessor waits for has
 * failed by then.  A callback attached to a future already complete runs
 * at once in the attaching thread; tacl_torch wraps Future.then and
 * add_done_callback in _as_callbacks, so that one counts too.
 */
class Completer {
  public:
    static Completer &get()
    {
        /* Never destroyed: the threads may outlive static destructors. */
        static Completer *c = new Completer();
        return *c;
    }

    void issued(TaclWork *w);
    void ready(TaclWork *w);
    bool claim(TaclWork *w, std::chrono::steady_clock::time_point until);

    /*
     * At interpreter exit (atexit): the threads stop between two works
     * and keep what they hold.  Marking a future or dropping the last
     * reference to one may take the GIL, and a thread that takes it while
     * Python finalizes is unwound by pthread_exit, which ends the process
     * with "terminate called without an active exception".
     */
    void stop()
    {
        std::unique_lock<std::mutex> l(mu_);
        stop_ = true;
        cv_.notify_all();
        stopped_cv_.wait_for(l, std::chrono::seconds(10),
                             [this] { return stopped_ == threads_; });
    }

  private:
    using Clock = std::chrono::steady_clock;

    /* A communicator's root works, in the order they were started. */
    struct Queue {
        std::deque<c10::intrusive_ptr<TaclWork>> works;
        int busy = 0;       /* of them being finished */
        Clock::time_point since; /* when the latest began */
        Ms patience{0};     /* the group's timeout */
    };

    /* Threads started at first; another starts whenever a work is ready
     * and none is free (each may be blocked in a callback's wait), up to
     * kMaxThreads. */
    static constexpr int kThreads = 2;
    static constexpr int kMaxThreads = 64;

    Completer()
    {
        std::lock_guard<std::mutex> l(mu_);
        for (int i = 0; i < kThreads; i++)
            spawn_locked();
    }
    void spawn_locked();
    void loop();
    c10::intrusive_ptr<TaclWork> take_locked(Clock::time_point now,
                                             Clock::time_point *wake);
    bool may_take_locked(Queue &q, TaclWork *w, Clock::time_point now,
                         Clock::time_point *wake);
    void done_locked(const Comm *key);

    std::mutex mu_;
    std::condition_variable cv_, stopped_cv_;
    bool stop_ = false;
    int threads_ = 0, idle_ = 0, stopped_ = 0;
    std::deque<c10::intrusive_ptr<TaclWork>> free_; /* nested, ready */
    std::deque<c10::intrusive_ptr<TaclWork>> drop_; /* callbacks' holds */
    std::map<const Comm *, Queue> queues_;
};

class TaclWork : public c10d::Work {
  public:
    TaclWork(std::shared_ptr<Comm> comm, int rank, OpType type,
             const char *title, std::vector<at::Tensor> outputs, bool async,
             const Place &place)
        : c10d::Work(rank, type, title), comm_(std::move(comm)),
          async_(async), place_(place),
          ordered_(!place.cuda && in_callbacks == 0),
          outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get()),
              place.cuda ? std::vector<c10::Device>{c10::Device(
                               c10::DeviceType::CUDA, place.device)}
                         : std::vector<c10::Device>{}))
    {
    }

    ~TaclWork() override
    {
        if (req_ != nullptr && done_)
            tacl_request_free(req_);
    }

    /* Tensors the operation reads or writes besides the outputs. */
    void keep(const at::Tensor &t) { keep_.push_back(t); }
    /*
     * An operation recorded between startCoalescing and endCoalescing:
     * it completes with the coalesced work, which w is (follow).
     */
    void recorded(const char *what) { what_ = what; }
    void follow(c10::intrusive_ptr<TaclWork> w)
    {
        followers_.push_back(std::move(w));
    }
    /* Run after success, before the future completes. */
    void then(std::function<void()> f) { epilogue_.push_back(std::move(f)); }
    /* Writes into tmp go to dst at completion (dst not contiguous). */
    void copy_back(const at::Tensor &tmp, const at::Tensor &dst)
    {
        then([tmp, dst]() mutable { dst.copy_(tmp); });
    }

    /* Whether the caller may go on before it completes (asyncOp). */
    bool async() const { return async_; }
    /* Where it runs: host memory, or a CUDA device and stream. */
    const Place &place() const { return place_; }
    /* The stream tacl orders the operation on (null: host memory). */
    void *stream() const { return place_.stream; }

    /* The operation ran to its end in the caller's thread with status s. */
    void ended(tacl_status_t s, const char *what)
    {
        what_ = what;
        finish(s);
    }

#ifdef TACL_TORCH_CUDA
    /*
     * The operation was just enqueued on its stream (req: its request,
     * null if it already completed): the epilogue follows it on the
     * stream, the end event is recorded after that, and the future
     * completes now, its waiters ordered after the event by torch.
     */
    void enqueued(tacl_request_t req, const char *what)
    {
        at::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream(
            place_.device);
        {
            std::lock_guard<std::mutex> l(mu_);
            run_epilogue_locked();
            end_.record(stream);
            enqueued_ = true;
        }
        if (error_)
            future_->setError(error_);
        else
            future_->markCompleted(c10::IValue(outputs_));
        start(req, what);
    }
#endif

    /* Adopt the request just started; null: it already completed. */
    void start(tacl_request_t req, const char *what)
    {
        if (req == nullptr) {
            ended(TACL_OK, what);
            return;
        }
        what_ = what;
        req_ = req;
        /* In the order started, before the request can call back. */
        if (ordered_)
            Completer::get().issued(this);
        /* The callback holds a reference until it has run. */
        TaclWork *held =
            c10::intrusive_ptr<TaclWork>::reclaim_copy(this).release();
        tacl_status_t s = tacl_request_set_callback(req, on_done, held);
        if (s != TACL_OK) {
            /* Not expected (a fresh request takes one callback): the
             * request still runs, so end it here, within the timeout,
             * and report why; the completion threads mark it. */
            tacl_request_wait(req);
            std::unique_lock<std::mutex> l(mu_);
            complete_locked(s);
            l.unlock();
            Completer::get().ready(held);
        }
    }

    /* Finished one at a time in the order started (see Completer). */
    bool ordered() const { return ordered_; }
    /* The communicator it runs on: its order's key. */
    const Comm *comm_key() const { return comm_.get(); }
    Ms patience() const { return comm_->timeout; }
    /* Its request completed (set and read under the Completer's lock). */
    bool ready_ = false;

    bool isCompleted() override
    {
#ifdef TACL_TORCH_CUDA
        /* On a stream: when the GPU has passed the end (or it failed). */
        if (place_.cuda)
            return error_ != nullptr || (enqueued_ && end_.query());
#endif
        std::unique_lock<std::mutex> l(mu_, std::try_to_lock);
        if (!l.owns_lock() || done_)
            return done_;
        int d = 0;
        tacl_status_t s = tacl_request_test(req_, &d);
        if (d || s < 0)
            complete_locked(s);
        l.unlock();
        /* An ordered work's future waits its turn (see Completer). */
        if (done_ && !ordered_)
            mark_future();
        return done_;
    }

    bool isSuccess() const override { return done_ && !error_; }
    /* A receive from any source: who sent, once it completed. */
    int sourceRank() const override { return source_; }
    int *source() { return &source_; }
    std::exception_ptr exception() const override { return error_; }
    std::vector<at::Tensor> result() override { return outputs_; }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        return future_;
    }

    bool wait(Ms timeout) override
    {
#ifdef TACL_TORCH_CUDA
        /* On a stream: the caller's current stream waits for the end;
         * the host does not (as ProcessGroupNCCL's). */
        if (place_.cuda) {
            synchronize();
            if (error_)
                std::rethrow_exception(error_);
            return true;
        }
#endif
        auto end = timeout == kNoTimeout
                       ? std::chrono::steady_clock::time_point::max()
                       : std::chrono::steady_clock::now() + timeout;
        std::unique_lock<std::mutex> l(mu_);
        if (!done_) {
            tacl_status_t s;
            if (timeout == kNoTimeout) {
                s = tacl_request_wait(req_);
            } else {
                int d = 0;
                while ((s = tacl_request_test(req_, &d)) == TACL_OK && !d) {
                    if (std::chrono::steady_clock::now() >= end)
                        not_complete(timeout);
                    std::this_thread::yield();
                }
            }
            complete_locked(s);
        }
        l.unlock();
        /* An ordered work's future is marked in its turn: here, when it
         * is first, else by the thread whose turn it is. */
        if (!ordered_)
            mark_future();
        else if (!Completer::get().claim(this, end))
            not_complete(timeout);
        if (error_)
            std::rethrow_exception(error_);
        return true;
    }

#ifdef TACL_TORCH_CUDA
    /* The caller's current stream on the device waits for the end. */
    void synchronize() override
    {
        if (place_.cuda && enqueued_)
            end_.block(at::cuda::getCurrentCUDAStream(place_.device));
    }
#endif

    void abort() override
    {
        if (!comm_->aborted.exchange(true))
            tacl_comm_abort(comm_->comm);
    }

    /* A completion thread (or wait(), in its turn), once the request
     * completed. */
    void finish_from_callback()
    {
        std::unique_lock<std::mutex> l(mu_);
        complete_locked(cb_status_);
        l.unlock();
        mark_future();
    }

    bool marked() const { return marked_; }

  private:
    static void on_done(tacl_request_t, tacl_status_t s, void *arg)
    {
        TaclWork *w = static_cast<TaclWork *>(arg);
        w->cb_status_ = s;
        Completer::get().ready(w); /* takes over the reference */
    }

    void finish(tacl_status_t s)
    {
        std::unique_lock<std::mutex> l(mu_);
        complete_locked(s);
        l.unlock();
        mark_future();
    }

    [[noreturn]] void not_complete(Ms timeout) const
    {
        C10_THROW_ERROR(DistBackendError,
                        std::string("tacl: ") + what_ +
                            ": not complete after " +
                            std::to_string(timeout.count()) + " ms");
    }


    /* With mu_ held: record the outcome once; true if this call did. */
    bool complete_locked(tacl_status_t s)
    {
        if (done_)
            return false;
        status_ = s;
        if (s < 0 && !comm_->aborted.load()) {
            try {
                fail(what_, comm_->comm, s);
            } catch (...) {
                error_ = std::current_exception();
            }
        } else if (s < 0) {
            error_ = std::make_exception_ptr(c10::DistBackendError(
                {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                std::string("tacl: ") + what_ +
                    ": the communicator was aborted"));
        } else {
            run_epilogue_locked();
        }
        epilogue_.clear();
        done_ = true;
        return true;
    }

    /* With mu_ held: run the epilogue once, keeping its failure. */
    void run_epilogue_locked()
    {
        try {
            for (auto &f : epilogue_)
                f();
        } catch (...) {
            error_ = std::current_exception();
        }
        epilogue_.clear();
    }

    /* Once, after complete_locked; a work on a stream completed it when
     * enqueued.  The callbacks run here, as a callback's (in_callbacks). */
    void mark_future()
    {
        if (marked_.exchange(true))
            return;
        InCallbacks here;
        for (auto &f : followers_)
            f->finish(status_);
        followers_.clear();
        if (place_.cuda)
            return;
        if (error_)
            future_->setError(error_);
        else
            future_->markCompleted(c10::IValue(outputs_));
    }

    std::shared_ptr<Comm> comm_;
    const bool async_;
    const Place place_;
    const bool ordered_;
    std::atomic<bool> marked_{false};
#ifdef TACL_TORCH_CUDA
    at::cuda::CUDAEvent end_;         /* recorded after the operation */
    std::atomic<bool> enqueued_{false};
#endif
    std::vector<at::Tensor> outputs_, keep_;
    std::vector<std::function<void()>> epilogue_;
    std::vector<c10::intrusive_ptr<TaclWork>> followers_;
    tacl_status_t status_ = TACL_OK; /* how it ended */
    c10::intrusive_ptr<c10::ivalue::Future> future_;
    const char *what_ = "";
    tacl_request_t req_ = nullptr;
    std::mutex mu_;
    std::atomic<bool> done_{false};
    tacl_status_t cb_status_ = TACL_OK;
    std::exception_ptr error_;
    int source_ = -1;
};

void Completer::spawn_locked()
{
    threads_++;
    std::thread t([this] { loop(); });
    /* Named for per-thread profiles (perf/torch_probe.py). */
    pthread_setname_np(t.native_handle(), "tacl-complete");
    t.detach();
}

/* A root work, just started: its turn is after those started before. */
void Completer::issued(TaclWork *w)
{
    std::lock_guard<std::mutex> l(mu_);
    Queue &q = queues_[w->comm_key()];
    q.patience = w->patience();
    q.works.push_back(c10::intrusive_ptr<TaclWork>::reclaim_copy(w));
}

/* w's request completed; takes over the callback's reference. */
void Completer::ready(TaclWork *w)
{
    auto held = c10::intrusive_ptr<TaclWork>::reclaim(w);
    std::lock_guard<std::mutex> l(mu_);
    held->ready_ = true;
    /* Not dropped here: the last reference may free a future holding
     * Python objects, which takes the GIL, and this is the library's
     * progress thread, which a thread holding the GIL may wait for. */
    (held->ordered() ? drop_ : free_).push_back(std::move(held));
    /* Every thread may be inside a callback waiting for this one. */
    if (idle_ == 0 && threads_ < kMaxThreads && !stop_)
        spawn_locked();
    cv_.notify_all();
}

/*
 * Whether w, first of q and ready, may be finished now: when none of q is
 * being finished, or the latest has run for q's patience.  Else *wake is
 * when that will be.
 */
bool Completer::may_take_locked(Queue &q, TaclWork *w, Clock::time_point now,
                                Clock::time_point *wake)
{
    if (q.works.empty() || q.works.front().get() != w || !w->ready_)
        return false;
    if (q.busy == 0 || now >= q.since + q.patience) {
        q.works.pop_front();
        q.busy++;
        q.since = now;
        return true;
    }
    *wake = std::min(*wake, q.since + q.patience);
    return false;
}

/* The next work a thread may finish, if any. */
c10::intrusive_ptr<TaclWork> Completer::take_locked(Clock::time_point now,
                                                    Clock::time_point *wake)
{
    if (!free_.empty()) {
        c10::intrusive_ptr<TaclWork> w = std::move(free_.front());
        free_.pop_front();
        return w;
    }
    for (auto &kq : queues_) {
        Queue &q = kq.second;
        if (q.works.empty())
            continue;
        c10::intrusive_ptr<TaclWork> w = q.works.front();
        if (may_take_locked(q, w.get(), now, wake))
            return w;
    }
    return {};
}

/* A root work of key's queue was finished. */
void Completer::done_locked(const Comm *key)
{
    auto it = queues_.find(key);
    if (it != queues_.end() && --it->second.busy == 0 &&
        it->second.works.empty())
        queues_.erase(it);
    cv_.notify_all();
}

/*
 * wait() on a root work whose request completed: finish it here if it is
 * its turn, else wait until the thread whose turn it is has; false when
 * until passed first.
 */
bool Completer::claim(TaclWork *w, Clock::time_point until)
{
    /* The thread whose turn it is may run Python callbacks, and c10d
     * calls wait() holding the GIL at times (DDP's bucket rebuild). */
    NoGil nogil;
    std::unique_lock<std::mutex> l(mu_);
    w->ready_ = true;
    for (;;) {
        if (w->marked())
            return true;
        auto now = Clock::now();
        auto wake = until;
        auto it = queues_.find(w->comm_key());
        if (it != queues_.end() && may_take_locked(it->second, w, now, &wake)) {
            l.unlock();
            w->finish_from_callback();
            l.lock();
            done_locked(w->comm_key());
            return true;
        }
        if (now >= until)
            return false;
        cv_.wait_until(l, wake);
    }
}

void Completer::loop()
{
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
        if (stop_) {
            stopped_++;
            stopped_cv_.notify_all();
            return;
        }
        if (!drop_.empty()) {
            c10::intrusive_ptr<TaclWork> d = std::move(drop_.front());
            drop_.pop_front();
            l.unlock();
            d.reset();
            l.lock();
            continue;
        }
        auto wake = Clock::time_point::max();
        c10::intrusive_ptr<TaclWork> w = take_locked(Clock::now(), &wake);
        if (!w) {
            idle_++;
            if (wake == Clock::time_point::max())
                cv_.wait(l);
            else
                cv_.wait_until(l, wake);
            idle_--;
            continue;
        }
        l.unlock();
        w->finish_from_callback();
        const Comm *key = w->ordered() ? w->comm_key() : nullptr;
        w.reset(); /* may free the work: outside the lock */
        l.lock();
        if (key != nullptr)
            done_locked(key);
    }
}

/* ---- tensors and types ---- */

static tacl_dtype_t dtype_of(at::ScalarType t, const char *what)
{
    switch (t) {
    case at::kChar: return TACL_INT8;
    case at::kByte: return TACL_UINT8;
    case at::kBool: return TACL_UINT8;
    case at::kInt: return TACL_INT32;
    case at::kUInt32: return TACL_UINT32;
    case at::kLong: return TACL_INT64;
    case at::kUInt64: return TACL_UINT64;
    case at::kHalf: return TACL_FLOAT16;
    case at::kBFloat16: return TACL_BFLOAT16;
    case at::kFloat: return TACL_FLOAT32;
    case at::kDouble: return TACL_FLOAT64;
    default:
        unsupported(std::string(what) + ": tacl has no dtype " +
                    c10::toString(t));
    }
}

/* A tensor as tacl sees it: complex tensors as their real pairs. */
struct View {
    at::Tensor t; /* contiguous, what tacl reads or writes */
    tacl_dtype_t dtype;
    size_t count;
    void *ptr() const { return t.data_ptr(); }
};

static void check_device(const at::Tensor &t, const char *what)
{
#ifdef TACL_TORCH_CUDA
    bool served = t.device().is_cpu() || t.device().is_cuda();
    const char *serves = "CPU and CUDA tensors";
#else
    bool served = t.device().is_cpu();
    const char *serves = "CPU tensors only (this tacl_torch was built "
                         "without CUDA: torch has none, or "
                         "TACL_TORCH_CUDA=0)";
#endif
    if (!served)
        unsupported(std::string(what) + ": tacl serves " + serves + ", got " +
                    t.device().str() +
                    " (use a backend string such as \"cpu:tacl,cuda:nccl\")");
    if (t.is_sparse())
        unsupported(std::string(what) + ": sparse tensors (tacl takes "
                    "them in all_reduce only)");
}

static View view_of(at::Tensor t, const char *what)
{
    check_device(t, what);
    if (t.is_complex())
        t = at::view_as_real(t);
    return View{t, dtype_of(t.scalar_type(), what),
                static_cast<size_t>(t.numel())};
}

/* An input: read only, a contiguous copy if it is not contiguous. */
static View readable(const at::Tensor &t, const char *what)
{
    return view_of(t.contiguous(), what);
}

/* An output (or in-out): a contiguous stand-in copied back at the end. */
static View writable(TaclWork &w, const at::Tensor &t, const char *what,
                     bool read_too)
{
    /* First: a sparse tensor has no strides to ask is_contiguous(). */
    check_device(t, what);
    if (t.is_contiguous())
        return view_of(t, what);
    at::Tensor tmp = read_too ? t.contiguous()
                              : at::empty(t.sizes(), t.options());
    w.copy_back(tmp, t);
    return view_of(tmp, what);
}

static at::Tensor flat_like(const at::Tensor &t, int64_t n)
{
    return at::empty({n}, t.options());
}

static void same_type(const at::Tensor &a, const at::Tensor &b,
                      const char *what)
{
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tacl backend: ", what,
                ": tensors of different dtypes (", a.scalar_type(), ", ",
                b.scalar_type(), ")");
}

/* Tensors of one list entry and its peer: same dtype and size. */
static void same_size(const at::Tensor &a, const at::Tensor &b,
                      const char *what)
{
    same_type(a, b, what);
    TORCH_CHECK(a.numel() == b.numel(), "tacl backend: ", what, ": a tensor "
                "of ", a.numel(), " elements where ", b.numel(),
                " are expected");
}

static void single(const std::vector<at::Tensor> &v, const char *what)
{
    TORCH_CHECK(v.size() == 1, "tacl backend: ", what,
                " takes one tensor per process, got ", v.size());
}

struct Op {
    tacl_op_t op = TACL_SUM;
    double premul = 1.0;
    at::Tensor factor; /* PREMUL_SUM's factor as a tensor, if given so */
    bool scale = false;
};

/* c10d's ReduceOp on a dtype, as a tacl op (PREMUL_SUM scales, then sums). */
static Op op_of(const ReduceOp &r, const at::Tensor &t, const char *what)
{
    bool boolean = t.scalar_type() == at::kBool;
    bool cplx = t.is_complex();
    Op o;
    switch (r.op_) {
    case ReduceOp::SUM: o.op = TACL_SUM; break;
    case ReduceOp::AVG: o.op = TACL_AVG; break;
    case ReduceOp::PRODUCT: o.op = TACL_PROD; break;
    case ReduceOp::MIN: o.op = TACL_MIN; break;
    case ReduceOp::MAX: o.op = TACL_MAX; break;
    case ReduceOp::BAND: o.op = TACL_BAND; break;
    case ReduceOp::BOR: o.op = TACL_BOR; break;
    case ReduceOp::BXOR: o.op = TACL_BXOR; break;
    case ReduceOp::PREMUL_SUM: {
        o.op = TACL_SUM;
        o.scale = true;
        auto *s = static_cast<c10d::PreMulSumSupplement *>(
            r.supplement_.get());
        TORCH_CHECK(s != nullptr, "tacl backend: ", what,
                    ": PREMUL_SUM without its factor");
        /* A tensor factor stays a tensor: reading it would wait for the
         * GPU where it lives there. */
        if (s->tensor_factor.defined())
            o.factor = s->tensor_factor;
        else
            o.premul = s->double_factor;
        break;
    }
    default:
        unsupported(std::string(what) + ": reduce op " +
                    std::to_string(static_cast<int>(r.op_)));
    }
    /* bool rides as uint8 0/1: only ops that keep values in {0, 1}. */
    if (boolean && !(o.op == TACL_MIN || o.op == TACL_MAX ||
                     o.op == TACL_BAND || o.op == TACL_BOR ||
                     o.op == TACL_BXOR))
        unsupported(std::string(what) + ": bool tensors with " +
                    tacl_op_name(o.op) + " (use MAX, MIN, BAND, BOR or BXOR)");
    /* complex rides as real pairs: only element-wise linear ops. */
    if (cplx && !(o.op == TACL_SUM || o.op == TACL_AVG))
        unsupported(std::string(what) + ": complex tensors with " +
                    (o.scale ? "PREMUL_SUM" : tacl_op_name(o.op)));
    return o;
}

/* The source of a reduction: a scaled copy for PREMUL_SUM. */
static View reduce_source(TaclWork &w, const View &v, const Op &o)
{
    if (!o.scale)
        return v;
    at::Tensor s = o.factor.defined()
                       ? v.t.mul(o.factor.to(v.t.device(), true))
                       : v.t.mul(o.premul);
    w.keep(s);
    return View{s, v.dtype, v.count};
}

/* The buffer lists of one coalesced tacl call. */
struct BufLists {
    std::vector<const void *> send;
    std::vector<void *> recv;
    std::vector<size_t> counts;
    tacl_dtype_t dtype = TACL_FLOAT32;

    void add(const void *s, void *r, size_t count, tacl_dtype_t dt)
    {
        send.push_back(s);
        recv.push_back(r);
        counts.push_back(count);
        dtype = dt;
    }
    int n() const { return static_cast<int>(send.size()); }
};

/* Between startCoalescing and endCoalescing, in this thread. */
struct Coalescing {
    bool on = false;
    std::vector<c10::intrusive_ptr<TaclWork>> recorded;
};
static thread_local Coalescing coalescing;

/* ---- the backend ---- */

/*
 * The store's key for rank 0's unique id.  torchrun --max-restarts keeps
 * its store across attempts under the same prefix: a later attempt's
 * ranks read the dead attempt's id unless the key names the attempt, and
 * then wait for a listener that is gone (seen: every rank of attempt 1
 * retrying a connection until the group's timeout).
 */
static std::string id_key(const char *what)
{
    const char *attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
    return std::string(what) + "/attempt_" +
           (attempt != nullptr && *attempt != '\0' ? attempt : "0");
}

/* Communicators this process bootstrapped through a store (tests). */
static std::atomic<int> bootstraps{0};

class TaclBackend : public c10d::Backend {
  public:
    /* Bootstrap through the store: rank 0's unique id goes to the others. */
    TaclBackend(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                int size, Ms timeout, const std::string &name)
        : c10d::Backend(rank, size), timeout_(timeout),
          name_(name.substr(0, 127)), store_(store)
    {
        comm_ = bootstrap(id_key("tacl_unique_id"), name_);
    }

    /* A member of a split of parent (color, key as tacl_comm_split). */
    TaclBackend(TaclBackend &parent, int color, int key, int rank, int size,
                Ms timeout, const std::string &name)
        : c10d::Backend(rank, size), timeout_(timeout),
          name_(name.substr(0, 127))
    {
        comm_ = std::make_shared<Comm>();
        comm_->timeout = timeout;
        tacl_config_t cfg = config(name_);
        tacl_status_t s = parent.split_comm(color, key, &cfg, &comm_->comm);
        if (s != TACL_OK)
            fail("tacl_comm_split_config", parent.comm(), s);
        TORCH_CHECK(comm_->comm != nullptr,
                    "tacl backend: split returned no communicator");
        from_split_ = true;
        int r = -1, n = -1;
        tacl_comm_rank(comm_->comm, &r);
        tacl_comm_size(comm_->comm, &n);
        TORCH_CHECK(r == rank && n == size, "tacl backend: split gave rank ",
                    r, " of ", n, ", c10d expects ", rank, " of ", size);
    }

    /* A member of a group of some of parent's ranks, made by those ranks
     * only (tacl_comm_create_group): new_group() of a subset, which c10d
     * builds on its members alone. */
    TaclBackend(TaclBackend &parent, const std::vector<int> &ranks, int tag,
                int rank, int size, Ms timeout, const std::string &name)
        : c10d::Backend(rank, size), timeout_(timeout),
          name_(name.substr(0, 127))
    {
        comm_ = std::make_shared<Comm>();
        comm_->timeout = timeout;
        tacl_config_t cfg = config(name_);
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_comm_create_group_config(
                parent.comm_->comm, static_cast<int>(ranks.size()),
                ranks.data(), tag, &cfg, &comm_->comm);
        }
        if (s != TACL_OK)
            fail("tacl_comm_create_group_config", parent.comm_->comm, s);
        made_by_ = "group";
        int r = -1, n = -1;
        tacl_comm_rank(comm_->comm, &r);
        tacl_comm_size(comm_->comm, &n);
        TORCH_CHECK(r == rank && n == size, "tacl backend: create_group ",
                    "gave rank ", r, " of ", n, ", c10d expects ", rank,
                    " of ", size);
    }

    /* The communicator of what this thread starts: the callback
     * communicator inside a future's callbacks, else the group's. */
    tacl_comm_t comm() { return issuing()->comm; }
    /* The group's communicator, kept alive by whoever holds it
     * (Snapshot). */
    std::shared_ptr<Comm> shared_comm() const { return comm_; }
    /* The store the callback communicator is bootstrapped through (a
     * split's or group's: the one c10d gave its creator). */
    void set_store(const c10::intrusive_ptr<c10d::Store> &store)
    {
        std::lock_guard<std::mutex> l(callback_mu_);
        store_ = store;
    }
    /* Whether the callback communicator was made (tests). */
    bool has_callback_comm()
    {
        std::lock_guard<std::mutex> l(callback_mu_);
        return callback_ != nullptr;
    }
    bool from_split() const { return from_split_; }
    const char *made_by() const { return from_split_ ? "split" : made_by_; }

    /* tacl_comm_split_config on this backend's communicator. */
    tacl_status_t split_comm(int color, int key, const tacl_config_t *cfg,
                             tacl_comm_t *out)
    {
        NoGil nogil;
        return tacl_comm_split_config(comm_->comm, color, key, cfg, out);
    }

    const std::string getBackendName() const override { return "tacl"; }

    /* What c10d clones and adjusts for split(): timeout and name. */
    c10::intrusive_ptr<Options> getBackendOptions() override
    {
        auto o = c10::make_intrusive<Options>("tacl", timeout_);
        o->group_name = name_;
        return o;
    }
    bool supportsSplitting() const override { return true; }

    /*
     * c10d's coalescing manager (torch.distributed._coalescing_manager,
     * batch_isend_irecv, DeepSpeed's all_gather_coalesced): the calls
     * between the two go into one tacl group, run by endCoalescing as
     * one request; each call's work completes with it.  tacl's groups
     * belong to a thread, not a communicator (as NCCL's), so the state
     * is the thread's: a call on another group made meanwhile (MiCS
     * makes some) joins the group and completes with it too, instead of
     * returning done before the group has run.
     */
    bool supportsCoalescing() const override { return true; }

    void startCoalescing() override
    {
        TORCH_CHECK(!coalescing.on, "tacl backend: startCoalescing while "
                    "already coalescing");
        tacl_status_t s = tacl_group_start();
        if (s != TACL_OK)
            fail("tacl_group_start", comm(), s);
        coalescing.on = true;
    }

    c10::intrusive_ptr<c10d::Work> endCoalescing() override
    {
        TORCH_CHECK(coalescing.on, "tacl backend: endCoalescing without "
                    "startCoalescing");
        coalescing.on = false;
        std::vector<at::Tensor> outs;
        for (auto &r : coalescing.recorded)
            for (auto &t : r->result())
                outs.push_back(t);
        auto w = work(OpType::COALESCED, "tacl:coalesced", outs, true);
        for (auto &r : coalescing.recorded)
            w->follow(r);
        coalescing.recorded.clear();
        tacl_request_t req = nullptr;
        tacl_status_t s;
        if (!w->place().cuda) {
            /*
             * Host memory has no stream to order what follows after the
             * group, as NCCL's does on the GPU: the group completes here.
             * Inside the manager torch hands out works no one may wait
             * for (_IllegalWork), and DeepSpeed's MiCS goes on past them
             * to read the gathered parameters, which must be there.
             */
            {
                NoGil nogil;
                s = tacl_group_end();
            }
            w->ended(s, "tacl_group_end");
            if (s != TACL_OK)
                fail("tacl_group_end", comm(), s);
            return w;
        }
        {
            NoGil nogil;
            s = tacl_group_end_nb(&req);
        }
        if (s != TACL_OK) {
            /* The recorded calls end with the group's failure. */
            w->ended(s, "tacl_group_end_nb");
            fail("tacl_group_end_nb", comm(), s);
        }
        w->start(req, "tacl_group_end_nb");
        return w;
    }
    uint64_t getSequenceNumberForGroup() override { return seq_; }

    c10::intrusive_ptr<c10d::Backend> split(
        const c10::intrusive_ptr<c10d::Store> &store,
        const std::vector<int> &ranks,
        const c10::intrusive_ptr<Options> &opts) override
    {
        auto it = std::find(ranks.begin(), ranks.end(), getRank());
        if (it == ranks.end()) {
            tacl_comm_t none = nullptr;
            tacl_status_t s =
                split_comm(TACL_SPLIT_NOCOLOR, 0, nullptr, &none);
            if (s != TACL_OK)
                fail("tacl_comm_split", comm(), s);
            return nullptr;
        }
        /* Disjoint groups have distinct smallest ranks: a fine color. */
        int color = *std::min_element(ranks.begin(), ranks.end());
        int key = static_cast<int>(it - ranks.begin());
        Ms t = opts ? opts->timeout : timeout_;
        std::string name = opts ? opts->group_name : name_ + ":split";
        auto b = c10::make_intrusive<TaclBackend>(
            *this, color, key, key, static_cast<int>(ranks.size()), t, name);
        b->set_store(store);
        return b;
    }

    void abort() override
    {
        for (Comm *c : {comm_.get(), callback_comm_or_null().get()})
            if (c != nullptr && !c->aborted.exchange(true))
                tacl_comm_abort(c->comm);
    }

    /*
     * New operations are refused from now on.  A communicator goes once
     * no work holds it (a work's request must be freed before it).
     */
    void shutdown() override
    {
        std::shared_ptr<Comm> cb = callback_comm_or_null();
        {
            std::lock_guard<std::mutex> l(callback_mu_);
            callback_.reset();
        }
        for (std::shared_ptr<Comm> *c : {&comm_, &cb}) {
            if (*c == nullptr)
                continue;
            (*c)->shut = true;
            if (c->use_count() == 1 && (*c)->comm != nullptr &&
                !(*c)->aborted.exchange(true)) {
                NoGil nogil;
                tacl_comm_destroy((*c)->comm);
            }
        }
    }

    /* ---- collectives ---- */

    c10::intrusive_ptr<c10d::Work> broadcast(
        std::vector<at::Tensor> &tensors,
        const c10d::BroadcastOptions &opts) override
    {
        single(tensors, "broadcast");
        auto w = work(OpType::BROADCAST, "tacl:broadcast", tensors,
                      opts.asyncOp);
        View v = writable(*w, tensors[0], "broadcast", true);
        return run(w, "tacl_broadcast_nb", [&](tacl_request_t *r) {
            return tacl_broadcast_nb(v.ptr(), v.ptr(), v.count, v.dtype,
                                     static_cast<int>(opts.rootRank), comm(),
                                     w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> allreduce(
        std::vector<at::Tensor> &tensors,
        const c10d::AllreduceOptions &opts) override
    {
        single(tensors, "allreduce");
        if (tensors[0].is_sparse())
            return allreduce_sparse(tensors[0], opts);
        return allreduce_list(tensors, opts.reduceOp, OpType::ALLREDUCE,
                              "tacl:all_reduce", opts.asyncOp);
    }

    /*
     * A sparse COO tensor, gloo's contract: the sum over ranks of the
     * coalesced rows replaces the tensor's rows (coalesced).  Its sparse
     * dimensions flatten to one row index, its dense ones make the row;
     * tacl_sparse_allreduce (TACL_TORCH_SPARSE names a scheme, default
     * auto) runs it.  Asynchronous (DDP's gradient buckets are): the _nb
     * form in the communicator's worker, and the result replaces the
     * rows when it completes (the work's epilogue), so backward goes on
     * meanwhile; the first such call splits the worker's communicator
     * and waits for every rank.  Otherwise the blocking form runs here.
     */
    c10::intrusive_ptr<c10d::Work> allreduce_sparse(
        at::Tensor &t, const c10d::AllreduceOptions &opts)
    {
        if (opts.reduceOp != c10d::ReduceOp::SUM)
            unsupported("allreduce of a sparse tensor: only SUM (rows a "
                        "rank does not have count as zeros)");
        if (t.is_complex())
            unsupported("allreduce of a sparse complex tensor");
        if (coalescing.on)
            unsupported("allreduce of a sparse tensor inside a coalesced "
                        "group (it is several collectives in a row)");
        std::vector<at::Tensor> tensors{t};
        auto w = work(OpType::ALLREDUCE, "tacl:all_reduce", tensors,
                      opts.asyncOp);
        auto call = std::make_shared<SparseCall>(t);
        tacl_dtype_t dtype = dtype_of(call->vals.scalar_type(), "allreduce");
        tacl_status_t s;
        if (!w->async()) {
            {
                NoGil nogil;
                s = tacl_sparse_allreduce(&call->in, dtype, TACL_SUM,
                                          nullptr, &call->res,
                                          sparse_scheme(), comm());
            }
            if (s != TACL_OK)
                fail("tacl_sparse_allreduce", comm(), s);
            call->write_back();
            w->ended(TACL_OK, "tacl_sparse_allreduce");
            return w;
        }
        /* The epilogue holds the call (its struct, rows and result) until
         * the work is done; a failed work frees it with the last hold. */
        w->then([call]() { call->write_back(); });
        tacl_request_t req = nullptr;
        {
            NoGil nogil;
            s = tacl_sparse_allreduce_nb(&call->in, dtype, TACL_SUM, nullptr,
                                         &call->res, sparse_scheme(), comm(),
                                         &req);
        }
        if (s != TACL_OK)
            fail("tacl_sparse_allreduce_nb", comm(), s);
        w->start(req, "tacl_sparse_allreduce_nb");
        return w;
    }

    /* TACL_TORCH_SPARSE: a scheme's name (tacl_sparse_scheme_name); auto
     * (the default) lets tacl choose. */
    static tacl_sparse_scheme_t sparse_scheme()
    {
        const char *v = std::getenv("TACL_TORCH_SPARSE");
        if (v == nullptr || *v == '\0')
            return TACL_SPARSE_AUTO;
        for (int i = 0; i < TACL_NUM_SPARSE_SCHEMES; i++) {
            auto sc = static_cast<tacl_sparse_scheme_t>(i);
            if (std::string(v) == tacl_sparse_scheme_name(sc))
                return sc;
        }
        unsupported(std::string("TACL_TORCH_SPARSE=") + v +
                    " (auto, zen, agsparse, ps, dense, sparcml, omni, "
                    "agpadded, zen_hier or dense_zen)");
    }

    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor> &tensors,
        const c10d::AllreduceCoalescedOptions &opts) override
    {
        return allreduce_list(tensors, opts.reduceOp,
                              OpType::ALLREDUCE_COALESCED,
                              "tacl:all_reduce_coalesced", opts.asyncOp);
    }

    c10::intrusive_ptr<c10d::Work> reduce(
        std::vector<at::Tensor> &tensors,
        const c10d::ReduceOptions &opts) override
    {
        single(tensors, "reduce");
        auto w = work(OpType::REDUCE, "tacl:reduce", tensors, opts.asyncOp);
        Op o = op_of(opts.reduceOp, tensors[0], "reduce");
        View v = writable(*w, tensors[0], "reduce", true);
        View src = reduce_source(*w, v, o);
        return run(w, "tacl_reduce_nb", [&](tacl_request_t *r) {
            return tacl_reduce_nb(src.ptr(), v.ptr(), v.count, v.dtype, o.op,
                                  static_cast<int>(opts.rootRank), comm(),
                                  w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> allgather(
        std::vector<std::vector<at::Tensor>> &outputs,
        std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &opts) override
    {
        single(inputs, "allgather");
        one_list(outputs, "allgather", "output tensors");
        bool even = true;
        for (auto &t : outputs[0]) {
            same_type(t, inputs[0], "allgather");
            even = even && t.numel() == inputs[0].numel();
        }
        if (!even)
            return allgather_uneven(outputs[0], inputs[0], opts);
        for (auto &t : outputs[0]) {
            same_size(t, inputs[0], "allgather");
        }
        auto w = work(OpType::ALLGATHER, "tacl:all_gather", outputs[0],
                      opts.asyncOp);
        View in = readable(inputs[0], "allgather");
        at::Tensor flat = flat_like(in.t, in.t.numel() * getSize());
        View out = view_of(flat, "allgather");
        std::vector<at::Tensor> outs = outputs[0];
        int64_t n = in.t.numel();
        w->then([flat, outs, n]() mutable {
            for (size_t i = 0; i < outs.size(); i++)
                outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n)
                                  .view(outs[i].sizes()));
        });
        w->keep(in.t);
        return run(w, "tacl_allgather_nb", [&](tacl_request_t *r) {
            return tacl_allgather_nb(in.ptr(), out.ptr(), in.count, in.dtype,
                                     comm(), w->stream(), r);
        });
    }

    /*
     * all_gather whose ranks give tensors of different sizes (torch
     * allows it, as NCCL's process group serves it): one tacl_allgatherv
     * into a flat buffer, rank i's tensor at the sum of the sizes before
     * it, copied into the list at the end.
     */
    c10::intrusive_ptr<c10d::Work> allgather_uneven(
        std::vector<at::Tensor> &outs, at::Tensor &input,
        const c10d::AllgatherOptions &opts)
    {
        int n = getSize();
        TORCH_CHECK(outs[static_cast<size_t>(getRank())].numel() ==
                        input.numel(),
                    "tacl backend: allgather: this rank's output tensor "
                    "has ", outs[static_cast<size_t>(getRank())].numel(),
                    " elements, its input ", input.numel());
        std::vector<size_t> counts(static_cast<size_t>(n)),
            displs(static_cast<size_t>(n));
        size_t total = 0;
        for (int p = 0; p < n; p++) {
            counts[p] = static_cast<size_t>(outs[p].numel());
            displs[p] = total;
            total += counts[p];
        }
        auto w = work(OpType::ALLGATHER, "tacl:all_gather", outs,
                      opts.asyncOp);
        View in = readable(input, "allgather");
        at::Tensor flat = flat_like(in.t, static_cast<int64_t>(total));
        View out = view_of(flat, "allgather");
        std::vector<at::Tensor> keep = outs;
        w->then([flat, keep, displs, counts]() mutable {
            for (size_t i = 0; i < keep.size(); i++)
                keep[i].copy_(flat.narrow(0,
                                          static_cast<int64_t>(displs[i]),
                                          static_cast<int64_t>(counts[i]))
                                  .view(keep[i].sizes()));
        });
        w->keep(in.t);
        /* tacl copies the counts before the call returns. */
        return run(w, "tacl_allgatherv_nb", [&](tacl_request_t *r) {
            return tacl_allgatherv_nb(in.ptr(), in.count, out.ptr(),
                                      counts.data(), displs.data(), in.dtype,
                                      comm(), w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(
        at::Tensor &output, at::Tensor &input,
        const c10d::AllgatherOptions &opts) override
    {
        check_gather_sizes(output, input, "all_gather_into_tensor");
        std::vector<at::Tensor> outs{output};
        auto w = work(OpType::_ALLGATHER_BASE, "tacl:all_gather_base", outs,
                      opts.asyncOp);
        View in = input_view(*w, input);
        View out = writable(*w, output, "all_gather_into_tensor", false);
        return run(w, "tacl_allgather_nb", [&](tacl_request_t *r) {
            return tacl_allgather_nb(in.ptr(), out.ptr(), in.count, in.dtype,
                                     comm(), w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &opts) override
    {
        return coalesced(outputs, inputs, nullptr,
                         OpType::ALLGATHER_INTO_TENSOR_COALESCED,
                         opts.asyncOp);
    }

    c10::intrusive_ptr<c10d::Work> gather(
        std::vector<std::vector<at::Tensor>> &outputs,
        std::vector<at::Tensor> &inputs,
        const c10d::GatherOptions &opts) override
    {
        single(inputs, "gather");
        int root = static_cast<int>(opts.rootRank);
        bool is_root = getRank() == root;
        if (is_root)
            one_list(outputs, "gather", "output tensors on the root");
        std::vector<at::Tensor> outs =
            is_root ? outputs[0] : std::vector<at::Tensor>{};
        auto w = work(OpType::GATHER, "tacl:gather", outs, opts.asyncOp,
                      inputs[0]);
        View in = input_view(*w, inputs[0]);
        std::vector<View> dst;
        for (auto &t : outs) {
            same_size(t, inputs[0], "gather");
            dst.push_back(writable(*w, t, "gather", false));
        }
        if (is_root)
            dst[root].t.copy_(in.t.view(dst[root].t.sizes()));
        return star(w, "gather", root, in, dst, true);
    }

    c10::intrusive_ptr<c10d::Work> scatter(
        std::vector<at::Tensor> &outputs,
        std::vector<std::vector<at::Tensor>> &inputs,
        const c10d::ScatterOptions &opts) override
    {
        single(outputs, "scatter");
        int root = static_cast<int>(opts.rootRank);
        bool is_root = getRank() == root;
        if (is_root)
            one_list(inputs, "scatter", "input tensors on the root");
        auto w = work(OpType::SCATTER, "tacl:scatter", outputs, opts.asyncOp);
        View out = writable(*w, outputs[0], "scatter", false);
        std::vector<View> src;
        if (is_root)
            for (auto &t : inputs[0]) {
                same_size(t, outputs[0], "scatter");
                src.push_back(input_view(*w, t));
            }
        if (is_root)
            out.t.copy_(src[root].t.view(out.t.sizes()));
        return star(w, "scatter", root, out, src, false);
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(
        std::vector<at::Tensor> &outputs,
        std::vector<std::vector<at::Tensor>> &inputs,
        const c10d::ReduceScatterOptions &opts) override
    {
        single(outputs, "reduce_scatter");
        one_list(inputs, "reduce_scatter", "input tensors");
        auto w = work(OpType::REDUCE_SCATTER, "tacl:reduce_scatter", outputs,
                      opts.asyncOp);
        Op o = op_of(opts.reduceOp, outputs[0], "reduce_scatter");
        std::vector<at::Tensor> parts;
        for (auto &t : inputs[0]) {
            same_size(t, outputs[0], "reduce_scatter");
            parts.push_back(t.reshape({-1}));
        }
        View in = reduce_source(*w, view_of(at::cat(parts), "reduce_scatter"),
                                o);
        w->keep(in.t);
        View out = writable(*w, outputs[0], "reduce_scatter", false);
        return run(w, "tacl_reduce_scatter_nb", [&](tacl_request_t *r) {
            return tacl_reduce_scatter_nb(in.ptr(), out.ptr(), out.count,
                                          out.dtype, o.op, comm(),
                                          w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor &output, at::Tensor &input,
        const c10d::ReduceScatterOptions &opts) override
    {
        check_gather_sizes(input, output, "reduce_scatter_tensor");
        std::vector<at::Tensor> outs{output};
        auto w = work(OpType::_REDUCE_SCATTER_BASE,
                      "tacl:reduce_scatter_base", outs, opts.asyncOp);
        Op o = op_of(opts.reduceOp, output, "reduce_scatter_tensor");
        View in = reduce_source(*w, input_view(*w, input), o);
        View out = writable(*w, output, "reduce_scatter_tensor", false);
        return run(w, "tacl_reduce_scatter_nb", [&](tacl_request_t *r) {
            return tacl_reduce_scatter_nb(in.ptr(), out.ptr(), out.count,
                                          out.dtype, o.op, comm(),
                                          w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::ReduceScatterOptions &opts) override
    {
        return coalesced(outputs, inputs, &opts.reduceOp,
                         OpType::REDUCE_SCATTER_TENSOR_COALESCED,
                         opts.asyncOp);
    }

    c10::intrusive_ptr<c10d::Work> alltoall_base(
        at::Tensor &output, at::Tensor &input,
        std::vector<int64_t> &out_splits, std::vector<int64_t> &in_splits,
        const c10d::AllToAllOptions &opts) override
    {
        same_type(output, input, "all_to_all_single");
        std::vector<at::Tensor> outs{output};
        auto w = work(OpType::ALLTOALL_BASE, "tacl:all_to_all", outs,
                      opts.asyncOp);
        View in = input_view(*w, input);
        View out = writable(*w, output, "all_to_all_single", false);
        int n = getSize();
        if (out_splits.empty() && in_splits.empty()) {
            TORCH_CHECK(in.count == out.count && in.count % n == 0,
                        "tacl backend: all_to_all_single: input and output "
                        "need the same size, divisible by ", n);
            return run(w, "tacl_alltoall_nb", [&](tacl_request_t *r) {
                return tacl_alltoall_nb(in.ptr(), out.ptr(), in.count / n,
                                        in.dtype, comm(), w->stream(), r);
            });
        }
        /* Uneven splits: rows of dimension 0, as tacl_alltoallv's counts
         * (copied before the call returns). */
        std::vector<int64_t> send = splits(in_splits, input, "input");
        std::vector<int64_t> recv = splits(out_splits, output, "output");
        size_t srow = input.dim() ? in.count / std::max<int64_t>(input.size(0), 1) : 1;
        size_t rrow = output.dim() ? out.count / std::max<int64_t>(output.size(0), 1) : 1;
        TORCH_CHECK(srow == rrow, "tacl backend: all_to_all_single: input "
                                  "and output rows differ in size");
        if (in.ptr() == out.ptr()) {
            /* tacl_alltoallv has no in-place form: send from a copy. */
            at::Tensor copy = in.t.clone();
            w->keep(copy);
            in = View{copy, in.dtype, in.count};
        }
        std::vector<size_t> sc(static_cast<size_t>(n)),
            sd(static_cast<size_t>(n)), rc(static_cast<size_t>(n)),
            rd(static_cast<size_t>(n));
        size_t so = 0, ro = 0;
        for (int p = 0; p < n; p++) {
            sc[p] = static_cast<size_t>(send[p]) * srow;
            rc[p] = static_cast<size_t>(recv[p]) * rrow;
            sd[p] = so;
            rd[p] = ro;
            so += sc[p];
            ro += rc[p];
        }
        return run(w, "tacl_alltoallv_nb", [&](tacl_request_t *r) {
            return tacl_alltoallv_nb(in.ptr(), sc.data(), sd.data(),
                                     out.ptr(), rc.data(), rd.data(),
                                     in.dtype, comm(), w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> alltoall(
        std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::AllToAllOptions &opts) override
    {
        int n = getSize();
        TORCH_CHECK(outputs.size() == static_cast<size_t>(n) &&
                        inputs.size() == static_cast<size_t>(n),
                    "tacl backend: all_to_all needs ", n,
                    " input and output tensors");
        auto w = work(OpType::ALLTOALL, "tacl:all_to_all", outputs,
                      opts.asyncOp);
        std::vector<View> in, out;
        for (int p = 0; p < n; p++) {
            same_type(outputs[p], inputs[p], "all_to_all");
            in.push_back(input_view(*w, inputs[p]));
            out.push_back(writable(*w, outputs[p], "all_to_all", false));
        }
        return run_group(w, "all_to_all", [&]() -> tacl_status_t {
            for (int p = 0; p < n; p++) {
                tacl_status_t s = post_send(*w, in[p], p);
                if (s == TACL_OK)
                    s = post_recv(*w, out[p], p);
                if (s != TACL_OK)
                    return s;
            }
            return TACL_OK;
        });
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors,
                                        int dst, int tag) override
    {
        single(tensors, "send");
        check_tag(tag, "send");
        auto w = work(OpType::SEND, "tacl:send", {}, true, tensors[0]);
        View v = input_view(*w, tensors[0]);
        return run(w, "tacl_send_tag_nb", [&](tacl_request_t *r) {
            return tacl_send_tag_nb(v.ptr(), v.count, v.dtype, dst, tag,
                                    comm(), w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors,
                                        int src, int tag) override
    {
        return recv_from(tensors, src, tag, OpType::RECV, "tacl:recv");
    }

    c10::intrusive_ptr<c10d::Work> recvAnysource(
        std::vector<at::Tensor> &tensors, int tag) override
    {
        return recv_from(tensors, TACL_ANY_SOURCE, tag,
                         OpType::RECVANYSOURCE, "tacl:recv_anysource");
    }

    /*
     * c10d's allgather_coalesced: outputs[r][i] gets rank r's inputs[i]
     * (gloo's layout).  Each input is gathered into one flat buffer of
     * its own dtype by one tacl_allgather_coalesced, and copied into the
     * lists at the end.
     */
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(
        std::vector<std::vector<at::Tensor>> &outputs,
        std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &opts) override
    {
        const char *what = "allgather_coalesced";
        TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()),
                    "tacl backend: ", what, ": ", outputs.size(),
                    " output lists, not one per rank (", getSize(), ")");
        std::vector<at::Tensor> all;
        for (auto &list : outputs) {
            TORCH_CHECK(list.size() == inputs.size(), "tacl backend: ", what,
                        ": an output list of ", list.size(),
                        " tensors for ", inputs.size(), " inputs");
            for (size_t i = 0; i < inputs.size(); i++) {
                same_size(list[i], inputs[i], what);
                all.push_back(list[i]);
            }
        }
        auto w = work(OpType::ALLGATHER_COALESCED, "tacl:all_gather_coalesced",
                      all, opts.asyncOp);
        BufLists l;
        for (size_t i = 0; i < inputs.size(); i++) {
            same_type(inputs[i], inputs[0], what);
            View in = input_view(*w, inputs[i]);
            int64_t n = inputs[i].numel();
            at::Tensor flat = flat_like(inputs[i], n * getSize());
            std::vector<at::Tensor> outs;
            for (auto &list : outputs)
                outs.push_back(list[i]);
            w->keep(flat);
            w->then([flat, outs, n]() mutable {
                for (size_t r = 0; r < outs.size(); r++)
                    outs[r].copy_(
                        flat.narrow(0, static_cast<int64_t>(r) * n, n)
                            .view(outs[r].sizes()));
            });
            l.add(in.ptr(), flat.data_ptr(), in.count, in.dtype);
        }
        return run(w, "tacl_allgather_coalesced_nb", [&](tacl_request_t *r) {
            return tacl_allgather_coalesced_nb(l.send.data(), l.recv.data(),
                                               l.counts.data(), l.n(),
                                               l.dtype, comm(), w->stream(),
                                               r);
        });
    }

    c10::intrusive_ptr<c10d::Work> barrier(
        const c10d::BarrierOptions &opts) override
    {
        auto w = work(OpType::BARRIER, "tacl:barrier", {}, opts.asyncOp);
        return run(w, "tacl_barrier_nb", [&](tacl_request_t *r) {
            return tacl_barrier_nb(comm(), nullptr, r);
        });
    }

    /*
     * torch's monitored_barrier on tacl_barrier_monitored, its failures in
     * the words torch's and gloo's users match: rank 0 names the late
     * rank(s), the others say that rank 0 failed them.
     */
    void monitoredBarrier(const c10d::BarrierOptions &opts,
                          bool wait_all) override
    {
        Ms t = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
        std::vector<int> missing(static_cast<size_t>(getSize()));
        int n = 0;
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_barrier_monitored(comm(), t.count() / 1000.0,
                                       wait_all ? 1 : 0, missing.data(), &n);
        }
        if (s == TACL_OK)
            return;
        std::string ms = std::to_string(t.count()) + " ms";
        std::string head;
        if (getRank() != 0) {
            head = "Rank " + std::to_string(getRank()) +
                   " successfully reached monitoredBarrier, but received "
                   "errors while waiting for send/recv from rank 0";
        } else if (t.count() == 0 || n == 0) {
            head = "Rank 0 timed out in monitoredBarrier after " + ms;
        } else {
            head = n > 1 ? "Ranks " : "Rank ";
            for (int i = 0; i < n; i++)
                head += (i ? ", " : "") + std::to_string(missing[i]);
            head += " failed to pass monitoredBarrier in " + ms;
        }
        C10_THROW_ERROR(DistBackendError, "tacl: " + head + ": " +
                                              tacl_message(comm(), s));
    }

    /*
     * tacl_torch's compressed calls (compress.cpp): blocking, or with
     * async the _nb form in the communicator's worker and a work holding
     * the buffers until it completes, so a DDP hook returns at once.
     */
    c10::intrusive_ptr<c10d::Work> compressed_all_reduce(
        at::Tensor &tensor, const tacl_torch::CodecArgs &c,
        const std::optional<at::Tensor> &err, const std::string &scheme,
        const std::string &hops, bool async)
    {
        auto w = work(OpType::ALLREDUCE, "tacl:compressed_all_reduce",
                      {tensor}, async);
        tacl_request_t req = nullptr;
        tacl_torch::comp_all_reduce(comm(), tensor, c, err, scheme, hops,
                                    async ? &req : nullptr);
        return compressed_started(w, err, req, "tacl_comp_allreduce_hops");
    }

    c10::intrusive_ptr<c10d::Work> compressed_reduce_scatter(
        at::Tensor &output, const at::Tensor &input,
        const tacl_torch::CodecArgs &c, const std::optional<at::Tensor> &err,
        const std::string &scheme, const std::string &hops, bool async)
    {
        auto w = work(OpType::REDUCE_SCATTER, "tacl:compressed_reduce_scatter",
                      {output}, async);
        w->keep(input);
        tacl_request_t req = nullptr;
        tacl_torch::comp_reduce_scatter(comm(), output, input, c, err, scheme,
                                        hops, async ? &req : nullptr);
        return compressed_started(w, err, req,
                                  "tacl_comp_reduce_scatter_hops");
    }

    /* ---- what only tacl offers ---- */

    c10::intrusive_ptr<c10d::Work> allgather_quantized(at::Tensor &output,
                                                       at::Tensor &input,
                                                       int bits, int block,
                                                       bool async)
    {
        check_gather_sizes(output, input, "all_gather_quantized");
        std::vector<at::Tensor> outs{output};
        auto w = work(OpType::_ALLGATHER_BASE, "tacl:all_gather_quantized",
                      outs, async);
        View in = input_view(*w, input);
        View out = writable(*w, output, "all_gather_quantized", false);
        tacl_quant_t q{bits, static_cast<uint32_t>(block)};
        return run(w, "tacl_allgather_quantized_nb", [&](tacl_request_t *r) {
            return tacl_allgather_quantized_nb(in.ptr(), out.ptr(), in.count,
                                               in.dtype, &q, comm(),
                                               w->stream(), r);
        });
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter_quantized(
        at::Tensor &output, at::Tensor &input, const ReduceOp &op, int bits,
        int block, bool async)
    {
        check_gather_sizes(input, output, "reduce_scatter_quantized");
        std::vector<at::Tensor> outs{output};
        auto w = work(OpType::_REDUCE_SCATTER_BASE,
                      "tacl:reduce_scatter_quantized", outs, async);
        Op o = op_of(op, output, "reduce_scatter_quantized");
        View in = reduce_source(*w, input_view(*w, input), o);
        View out = writable(*w, output, "reduce_scatter_quantized", false);
        tacl_quant_t q{bits, static_cast<uint32_t>(block)};
        return run(w, "tacl_reduce_scatter_quantized_nb",
                   [&](tacl_request_t *r) {
                       return tacl_reduce_scatter_quantized_nb(
                           in.ptr(), out.ptr(), out.count, out.dtype, o.op,
                           &q, comm(), w->stream(), r);
                   });
    }

    c10::intrusive_ptr<c10d::Work> coalesced(std::vector<at::Tensor> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const ReduceOp *rop, OpType type,
                                             bool async)
    {
        const char *what = rop ? "reduce_scatter_tensor_coalesced"
                               : "all_gather_into_tensor_coalesced";
        TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(),
                    "tacl backend: ", what,
                    " needs as many outputs as inputs (and at least one)");
        auto w = work(type, rop ? "tacl:reduce_scatter_coalesced"
                                : "tacl:all_gather_coalesced",
                      outputs, async);
        Op o;
        if (rop)
            o = op_of(*rop, outputs[0], what);
        BufLists l;
        for (size_t i = 0; i < inputs.size(); i++) {
            same_type(inputs[i], inputs[0], what);
            if (rop)
                check_gather_sizes(inputs[i], outputs[i], what);
            else
                check_gather_sizes(outputs[i], inputs[i], what);
            View in = input_view(*w, inputs[i]);
            if (rop)
                in = reduce_source(*w, in, o);
            View out = writable(*w, outputs[i], what, false);
            l.add(in.ptr(), out.ptr(), rop ? out.count : in.count, in.dtype);
        }
        if (rop)
            return run(w, "tacl_reduce_scatter_coalesced_nb",
                       [&](tacl_request_t *r) {
                           return tacl_reduce_scatter_coalesced_nb(
                               l.send.data(), l.recv.data(), l.counts.data(),
                               l.n(), l.dtype, o.op, comm(), w->stream(), r);
                       });
        return run(w, "tacl_allgather_coalesced_nb", [&](tacl_request_t *r) {
            return tacl_allgather_coalesced_nb(l.send.data(), l.recv.data(),
                                               l.counts.data(), l.n(),
                                               l.dtype, comm(), w->stream(),
                                               r);
        });
    }

  private:
    /* name: at most 127 characters, alive until the communicator is made. */
    tacl_config_t config(const std::string &name) const
    {
        tacl_config_t cfg = TACL_CONFIG_INIT;
        cfg.timeout = static_cast<double>(timeout_.count()) / 1000.0;
        cfg.name = name.c_str();
        /* The library completes requests (and calls back) by itself. */
        cfg.progress_thread = 1;
        return cfg;
    }

    /*
     * async: c10d's asyncOp (false: the caller waits for it at once).
     * The operation runs where ref lives (default: the first output; none:
     * host memory): a CUDA tensor's on torch's current stream there.
     */
    c10::intrusive_ptr<TaclWork> work(OpType type, const char *title,
                                      std::vector<at::Tensor> outputs,
                                      bool async = true,
                                      at::Tensor ref = at::Tensor())
    {
        if (comm_->aborted.load() || comm_->shut.load())
            C10_THROW_ERROR(DistBackendError,
                            std::string("tacl: ") + title +
                                ": the communicator was aborted or shut down");
        if (!ref.defined() && !outputs.empty())
            ref = outputs[0];
        seq_++;
        return c10::make_intrusive<TaclWork>(issuing(), getRank(), type, title,
                                             std::move(outputs), async,
                                             place_of(ref));
    }

    /* A compressed call's work: ended (blocking, req null), or waiting
     * for req with the residual held too. */
    c10::intrusive_ptr<c10d::Work> compressed_started(
        const c10::intrusive_ptr<TaclWork> &w,
        const std::optional<at::Tensor> &err, tacl_request_t req,
        const char *what)
    {
        if (!w->async()) {
            w->ended(TACL_OK, what);
            return w;
        }
        if (err.has_value() && err->defined())
            w->keep(*err);
        w->start(req, what);
        return w;
    }

    View input_view(TaclWork &w, const at::Tensor &t)
    {
        View v = readable(t, "input");
        w.keep(v.t);
        return v;
    }

    /* Start one request; a failure raises with tacl's message. */
    c10::intrusive_ptr<c10d::Work> run(
        const c10::intrusive_ptr<TaclWork> &w, const char *what,
        const std::function<tacl_status_t(tacl_request_t *)> &start)
    {
        if (coalescing.on) {
            /* Recorded into the open group (its request is NULL). */
            tacl_request_t ignored = nullptr;
            tacl_status_t s = start(&ignored);
            if (s != TACL_OK)
                fail(what, comm(), s);
            w->recorded(what);
            coalescing.recorded.push_back(w);
            return w;
        }
        if (!w->place().cuda && !w->async())
            return run_here(w, what, start);
        /* On CUDA tensors, asynchronous or not: the _nb call on torch's
         * current stream of their device, which is current for the call,
         * then the work's enqueued() (see the top of this file); nothing
         * waits on the host. */
#ifdef TACL_TORCH_CUDA
        c10::cuda::OptionalCUDAGuard guard;
        if (w->place().cuda)
            guard.set_index(w->place().device);
#endif
        tacl_request_t req = nullptr;
        tacl_status_t s = start(&req);
        if (s != TACL_OK)
            fail(what, comm(), s);
#ifdef TACL_TORCH_CUDA
        if (w->place().cuda) {
            w->enqueued(req, what);
            return w;
        }
#endif
        w->start(req, what);
        return w;
    }

    /*
     * An operation c10d waits for as soon as it is returned (asyncOp
     * false, torch's default): run to its end in this thread, the _nb
     * call inside a group whose blocking end waits for it.  Nothing else
     * takes a turn: the library's progress thread is not woken for a
     * blocking call, and no callback hands the work to the completion
     * thread.  Each of those hand-offs costs a context switch, and on a
     * node with more ranks than cores one more thread asking for a core:
     * an 8 MB all-gather on 4 ranks of 2 cores made 13-15 context
     * switches per rank and call with them, 2 without (perf/torch_probe.py).
     * A failure of the operation itself stays in the work, and its wait()
     * raises it, as for an asynchronous one.
     */
    c10::intrusive_ptr<c10d::Work> run_here(
        const c10::intrusive_ptr<TaclWork> &w, const char *what,
        const std::function<tacl_status_t(tacl_request_t *)> &start)
    {
        tacl_status_t s, end = TACL_OK;
        {
            NoGil nogil;
            s = tacl_group_start();
            if (s == TACL_OK) {
                /* The group is closed whatever start() does (it throws
                 * for a list of calls that failed, run_group). */
                struct Closer {
                    tacl_status_t &end;
                    ~Closer() { end = tacl_group_end(); }
                } closer{end};
                s = start(in_group());
            }
        }
        if (s != TACL_OK)
            fail(what, comm(), s);
        w->ended(end, what);
        return w;
    }

    /* Several calls as one group and one request. */
    c10::intrusive_ptr<c10d::Work> run_group(
        const c10::intrusive_ptr<TaclWork> &w, const char *what,
        const std::function<tacl_status_t()> &calls)
    {
        return run(w, what, [&](tacl_request_t *r) {
            tacl_status_t s = tacl_group_start();
            if (s != TACL_OK)
                return s;
            tacl_status_t first = calls();
            std::string msg = first != TACL_OK ? tacl_message(comm(), first)
                                               : std::string();
            s = tacl_group_end_nb(r);
            if (first != TACL_OK) {
                /* The group ran what was recorded; let it finish. */
                if (*r != nullptr) {
                    tacl_request_wait(*r);
                    tacl_request_free(*r);
                    *r = nullptr;
                }
                C10_THROW_ERROR(DistBackendError,
                                std::string("tacl: ") + what + ": " + msg);
            }
            return s;
        });
    }

    /*
     * Inside a group an _nb call still wants a request pointer; it gets a
     * NULL request there (the group's request covers the call).
     */
    static tacl_request_t *in_group()
    {
        static thread_local tacl_request_t ignored;
        return &ignored;
    }

    /* A send or receive of v (at ptr when given) inside w's group. */
    tacl_status_t post_send(const TaclWork &w, const View &v, int peer,
                            void *ptr = nullptr)
    {
        return tacl_send_nb(ptr ? ptr : v.ptr(), v.count, v.dtype, peer,
                            comm(), w.stream(), in_group());
    }

    tacl_status_t post_recv(const TaclWork &w, const View &v, int peer,
                            void *ptr = nullptr)
    {
        return tacl_recv_nb(ptr ? ptr : v.ptr(), v.count, v.dtype, peer,
                            comm(), w.stream(), in_group());
    }

    /*
     * gather (to_root) and scatter: the root exchanges theirs[p] with each
     * other rank p, every other rank exchanges mine with the root.
     */
    c10::intrusive_ptr<c10d::Work> star(const c10::intrusive_ptr<TaclWork> &w,
                                        const char *what, int root,
                                        const View &mine,
                                        const std::vector<View> &theirs,
                                        bool to_root)
    {
        return run_group(w, what, [&]() -> tacl_status_t {
            if (getRank() != root)
                return to_root ? post_send(*w, mine, root)
                               : post_recv(*w, mine, root);
            for (int p = 0; p < getSize(); p++) {
                if (p == root)
                    continue;
                tacl_status_t s = to_root ? post_recv(*w, theirs[p], p)
                                          : post_send(*w, theirs[p], p);
                if (s != TACL_OK)
                    return s;
            }
            return TACL_OK;
        });
    }

    c10::intrusive_ptr<c10d::Work> allreduce_list(
        std::vector<at::Tensor> &tensors, const ReduceOp &rop, OpType type,
        const char *title, bool async)
    {
        TORCH_CHECK(!tensors.empty(), "tacl backend: ", title,
                    ": no tensors");
        auto w = work(type, title, tensors, async);
        std::vector<View> v, src;
        std::vector<Op> ops;
        for (auto &t : tensors) {
            ops.push_back(op_of(rop, t, "allreduce"));
            v.push_back(writable(*w, t, "allreduce", true));
            src.push_back(reduce_source(*w, v.back(), ops.back()));
        }
        if (v.size() == 1)
            return run(w, "tacl_allreduce_nb", [&](tacl_request_t *r) {
                return tacl_allreduce_nb(src[0].ptr(), v[0].ptr(), v[0].count,
                                         v[0].dtype, ops[0].op, comm(),
                                         w->stream(), r);
            });
        return run_group(w, "allreduce_coalesced", [&]() -> tacl_status_t {
            for (size_t i = 0; i < v.size(); i++) {
                tacl_status_t s = tacl_allreduce_nb(
                    src[i].ptr(), v[i].ptr(), v[i].count, v[i].dtype,
                    ops[i].op, comm(), w->stream(), in_group());
                if (s != TACL_OK)
                    return s;
            }
            return TACL_OK;
        });
    }

    void one_list(const std::vector<std::vector<at::Tensor>> &v,
                  const char *what, const char *which) const
    {
        TORCH_CHECK(v.size() == 1 &&
                        v[0].size() == static_cast<size_t>(getSize()),
                    "tacl backend: ", what, " needs one list of ", getSize(),
                    " ", which);
    }

    /* big holds getSize() times small's elements, same dtype. */
    void check_gather_sizes(const at::Tensor &big, const at::Tensor &small,
                            const char *what)
    {
        same_type(big, small, what);
        TORCH_CHECK(big.numel() == small.numel() * getSize(),
                    "tacl backend: ", what, ": the larger tensor has ",
                    big.numel(), " elements, not ", getSize(), " x ",
                    small.numel());
    }

    std::vector<int64_t> splits(const std::vector<int64_t> &given,
                                const at::Tensor &t, const char *which)
    {
        int n = getSize();
        int64_t rows = t.dim() ? t.size(0) : 1;
        if (given.empty()) {
            TORCH_CHECK(rows % n == 0, "tacl backend: all_to_all_single: ",
                        which, " rows (", rows, ") not divisible by ", n);
            return std::vector<int64_t>(n, rows / n);
        }
        TORCH_CHECK(given.size() == static_cast<size_t>(n),
                    "tacl backend: all_to_all_single: ", which, " splits ",
                    "need ", n, " entries");
        int64_t sum = 0;
        for (int64_t s : given) {
            TORCH_CHECK(s >= 0, "tacl backend: negative split size");
            sum += s;
        }
        TORCH_CHECK(sum == rows, "tacl backend: all_to_all_single: ", which,
                    " splits add up to ", sum, ", the tensor has ", rows,
                    " rows");
        return given;
    }

    static void check_tag(int tag, const char *what)
    {
        TORCH_CHECK(tag >= 0, "tacl backend: ", what, " with tag ", tag,
                    ": tags are 0 or more (there is no any-tag receive)");
    }

    /* A receive from src (TACL_ANY_SOURCE: any rank) with tag. */
    c10::intrusive_ptr<c10d::Work> recv_from(std::vector<at::Tensor> &tensors,
                                             int src, int tag, OpType type,
                                             const char *title)
    {
        single(tensors, title);
        check_tag(tag, title);
        auto w = work(type, title, tensors);
        View v = writable(*w, tensors[0], title, false);
        int *source = w->source();
        *source = src;
        return run(w, "tacl_recv_tag_nb", [&](tacl_request_t *r) {
            return tacl_recv_tag_nb(v.ptr(), v.count, v.dtype, src, tag,
                                    source, comm(), w->stream(), r);
        });
    }

    /*
     * A communicator of this group's ranks through the store: rank 0's
     * unique id goes to the others under key.
     */
    std::shared_ptr<Comm> bootstrap(const std::string &key,
                                    const std::string &name)
    {
        tacl_unique_id_t id;
        NoGil nogil;
        if (getRank() == 0) {
            tacl_status_t s = tacl_get_unique_id(&id);
            if (s != TACL_OK)
                fail("tacl_get_unique_id", nullptr, s);
            store_->set(key, std::vector<uint8_t>(id.internal,
                                                  id.internal + sizeof(id)));
        } else {
            std::vector<uint8_t> v = store_->get(key);
            TORCH_CHECK(v.size() == sizeof(id),
                        "tacl backend: the unique id in the store has ",
                        v.size(), " bytes, not ", sizeof(id));
            std::copy(v.begin(), v.end(), id.internal);
        }
        auto c = std::make_shared<Comm>();
        c->timeout = timeout_;
        tacl_config_t cfg = config(name);
        tacl_status_t s = tacl_comm_init_rank_config(getSize(), &id,
                                                     getRank(), &cfg,
                                                     &c->comm);
        if (s != TACL_OK)
            fail("tacl_comm_init_rank_config", c->comm, s);
        bootstraps++;
        return c;
    }

    /*
     * What this thread starts runs on: inside a tacl future's callbacks
     * the callback communicator (see Completer), made by the first
     * callback's collective.  Through the store, not a split of the
     * group's communicator: that would be a collective among the main
     * thread's, which the main thread is starting meanwhile.  Every rank
     * makes it at its first callback's collective, which is the same one
     * on every rank: callbacks come in the same order.
     */
    std::shared_ptr<Comm> issuing()
    {
        if (in_callbacks == 0)
            return comm_;
        std::lock_guard<std::mutex> l(callback_mu_);
        if (callback_ == nullptr) {
            TORCH_CHECK(store_, "tacl backend: a collective inside a "
                        "future's callback needs the group's store for its "
                        "communicator, and group ", name_, " has none");
            callback_ = bootstrap(id_key("tacl_callback_id"),
                                  callback_name_);
        }
        return callback_;
    }

    std::shared_ptr<Comm> callback_comm_or_null()
    {
        std::lock_guard<std::mutex> l(callback_mu_);
        return callback_;
    }

    std::shared_ptr<Comm> comm_;
    Ms timeout_;
    std::string name_;
    std::string callback_name_ = name_.substr(0, 117) + ":callbacks";
    c10::intrusive_ptr<c10d::Store> store_;
    std::mutex callback_mu_;
    std::shared_ptr<Comm> callback_;
    uint64_t seq_ = 0;
    bool from_split_ = false;
    const char *made_by_ = "bootstrap"; /* or "group"; see made_by() */
};

/*
 * A snapshot set (tacl_snapshot_*) on a backend's communicator, for
 * tacl_torch.PeerCheckpointer.  Its regions are host tensors the set
 * keeps alive (the checkpointer's staging buffers).  A save is
 * tacl_snapshot_save_nb: the own copy is taken before it returns, the
 * copies to peers travel while training goes on; wait() ends it and is
 * called before the next save, a restore or close, as tacl.h asks.
 * Every call releases the GIL: they are collective, and a peer may need
 * the GIL-holding threads of its own process to reach them.
 */
class Snapshot {
  public:
    Snapshot(const TaclBackend &b, const std::string &key, int replicas,
             const std::string &placement, const std::string &domain)
        : comm_(b.shared_comm())
    {
        tacl_snapshot_config_t cfg{};
        cfg.replicas = replicas;
        cfg.job_key = key.c_str();
        if (placement == "auto")
            cfg.placement = TACL_SNAPSHOT_PLACE_AUTO;
        else if (placement == "group")
            cfg.placement = TACL_SNAPSHOT_PLACE_GROUP;
        else if (placement == "ring")
            cfg.placement = TACL_SNAPSHOT_PLACE_RING;
        else
            TORCH_CHECK(false, "tacl: snapshot placement \"", placement,
                        "\" (auto, group or ring)");
        if (domain == "node")
            cfg.domain = TACL_SNAPSHOT_DOMAIN_NODE;
        else if (domain == "rank")
            cfg.domain = TACL_SNAPSHOT_DOMAIN_RANK;
        else
            TORCH_CHECK(false, "tacl: snapshot failure domain \"", domain,
                        "\" (node or rank)");
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_snapshot_create(comm_->comm, &cfg, &snap_);
        }
        if (s != TACL_OK)
            fail("tacl_snapshot_create", comm_->comm, s);
    }

    Snapshot(const Snapshot &) = delete;
    Snapshot &operator=(const Snapshot &) = delete;

    /* A set never closed is left to the process's end: destroying it is
     * collective, which a garbage collector cannot promise. */
    ~Snapshot()
    {
        if (req_ != nullptr && snap_ != nullptr) {
            tacl_request_wait(req_);
            tacl_request_free(req_);
        }
    }

    void add(const std::string &name, const at::Tensor &t)
    {
        usable();
        TORCH_CHECK(t.device().is_cpu() && t.is_contiguous() &&
                        t.layout() == at::kStrided,
                    "tacl: snapshot region \"", name, "\": a contiguous "
                    "CPU tensor is needed, got ", t.device(), " ",
                    t.layout(), t.is_contiguous() ? "" : " (not contiguous)");
        tacl_status_t s = tacl_snapshot_register(snap_, name.c_str(),
                                                 t.data_ptr(), t.nbytes());
        if (s != TACL_OK)
            fail("tacl_snapshot_register", comm_->comm, s);
        regions_.push_back(t);
    }

    /* tacl_snapshot_replicated: ranks passing the same group >= 0 hold
     * the same state (-1: its own); collective, before the first save
     * or restore. */
    void replicated(int group)
    {
        usable();
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_snapshot_replicated(snap_, group);
        }
        if (s != TACL_OK)
            fail("tacl_snapshot_replicated", comm_->comm, s);
    }

    void save(uint64_t version)
    {
        usable();
        wait();
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_snapshot_save_nb(snap_, version, &req_);
        }
        if (s != TACL_OK) {
            req_ = nullptr;
            fail("tacl_snapshot_save_nb (version " + std::to_string(version) +
                     ")",
                 comm_->comm, s);
        }
    }

    /* Whether the last save's part of this rank is done (or none). */
    bool done()
    {
        if (req_ == nullptr)
            return true;
        int flag = 0;
        tacl_status_t s = tacl_request_test(req_, &flag);
        if (s != TACL_OK || flag)
            end_request(s);
        return flag != 0;
    }

    void wait()
    {
        if (req_ == nullptr)
            return;
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_request_wait(req_);
        }
        end_request(s);
    }

    py::object latest()
    {
        usable();
        wait();
        int found = 0;
        uint64_t v = 0;
        tacl_status_t s = tacl_snapshot_latest(snap_, &found, &v);
        if (s != TACL_OK)
            fail("tacl_snapshot_latest", comm_->comm, s);
        return found ? py::object(py::int_(v)) : py::none();
    }

    py::object restore()
    {
        usable();
        wait();
        int found = 0;
        uint64_t v = 0;
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_snapshot_restore(snap_, &found, &v);
        }
        if (s != TACL_OK)
            fail("tacl_snapshot_restore", comm_->comm, s);
        return found ? py::object(py::int_(v)) : py::none();
    }

    void close(bool purge)
    {
        if (snap_ == nullptr)
            return;
        wait();
        tacl_status_t s;
        {
            NoGil nogil;
            s = tacl_snapshot_destroy(snap_, purge ? 1 : 0);
        }
        snap_ = nullptr;
        regions_.clear();
        if (s != TACL_OK)
            fail("tacl_snapshot_destroy", comm_->comm, s);
    }

  private:
    void usable() const
    {
        TORCH_CHECK(snap_ != nullptr, "tacl: the snapshot set is closed");
    }

    /* Free the save's request; raise its failure with the library's
     * message (which the request's status alone does not carry). */
    void end_request(tacl_status_t s)
    {
        std::string msg = s != TACL_OK ? tacl_message(comm_->comm, s) : "";
        tacl_request_free(req_);
        req_ = nullptr;
        if (s != TACL_OK)
            C10_THROW_ERROR(DistBackendError,
                            "tacl: snapshot save: " + msg);
    }

    std::shared_ptr<Comm> comm_;
    tacl_snapshot_t snap_ = nullptr;
    tacl_request_t req_ = nullptr;
    std::vector<at::Tensor> regions_;
};

/*
 * tacl's counters as Python sees them: {"bytes", "messages" (to other
 * ranks: every link class but self), "links": {class: {"bytes",
 * "messages"}}, "transports": {name: {...}}}.
 */
static py::dict counters_dict(const tacl_counters_t &c)
{
    auto entry = [](uint64_t bytes, uint64_t messages) {
        py::dict d;
        d["bytes"] = bytes;
        d["messages"] = messages;
        return d;
    };
    py::dict links, transports, out;
    uint64_t bytes = 0, messages = 0;
    for (int i = 0; i < TACL_NUM_LINK_CLASSES; i++) {
        const tacl_link_counter_t &l = c.links[i];
        links[py::str(l.name)] = entry(l.bytes, l.messages);
        if (i != TACL_LINK_SELF) {
            bytes += l.bytes;
            messages += l.messages;
        }
    }
    for (int i = 0; i < c.n_transports && i < TACL_MAX_TRANSPORTS; i++)
        transports[py::str(c.transports[i].name)] =
            entry(c.transports[i].bytes, c.transports[i].messages);
    out["bytes"] = bytes;
    out["messages"] = messages;
    out["links"] = links;
    out["transports"] = transports;
    return out;
}

} // namespace tacl_torch

using tacl_torch::Snapshot;
using tacl_torch::TaclBackend;

PYBIND11_MODULE(_C, m)
{
    py::module::import("torch.distributed");
    m.doc() = "tacl collectives as a torch.distributed backend";
    m.def(
        "_codec_check",
        [](const std::string &codec, double density, int bits,
           int64_t block) {
            tacl_torch::CodecArgs c{codec, density, bits, block, 0};
            tacl_torch::codec_check(c);
            return tacl_torch::codec_summable(c);
        },
        py::arg("codec"), py::arg("density"), py::arg("bits"),
        py::arg("block"),
        "Raise ValueError naming what is wrong with a codec and its "
        "parameters; else whether its encodings add up as they are.");

    py::class_<TaclBackend, c10d::Backend, c10::intrusive_ptr<TaclBackend>>(
        m, "TaclBackend")
        .def(py::init<const c10::intrusive_ptr<c10d::Store> &, int, int,
                      std::chrono::milliseconds, const std::string &>(),
             py::arg("store"), py::arg("rank"), py::arg("size"),
             py::arg("timeout"), py::arg("name"),
             "Bootstrap a communicator through the c10d store.")
        .def(py::init([](TaclBackend &parent, int color, int key, int rank,
                         int size, std::chrono::milliseconds timeout,
                         const std::string &name) {
                 return c10::make_intrusive<TaclBackend>(
                     parent, color, key, rank, size, timeout, name);
             }),
             py::arg("parent"), py::arg("color"), py::arg("key"),
             py::arg("rank"), py::arg("size"), py::arg("timeout"),
             py::arg("name"),
             "A communicator split from parent's (tacl_comm_split).")
        .def(
            "perform_nocolor_split",
            [](TaclBackend &b, py::object) {
                tacl_comm_t none = nullptr;
                tacl_status_t s =
                    b.split_comm(TACL_SPLIT_NOCOLOR, 0, nullptr, &none);
                if (s != TACL_OK)
                    tacl_torch::fail("tacl_comm_split", b.comm(), s);
            },
            py::arg("device") = py::none(),
            "Take part in a split without joining any new communicator.")
        .def("_all_gather_quantized", &TaclBackend::allgather_quantized,
             py::arg("output"), py::arg("input"), py::arg("bits"),
             py::arg("block"), py::arg("async_op") = true,
             py::call_guard<py::gil_scoped_release>())
        .def("_reduce_scatter_quantized",
             &TaclBackend::reduce_scatter_quantized, py::arg("output"),
             py::arg("input"), py::arg("op"), py::arg("bits"),
             py::arg("block"), py::arg("async_op") = true,
             py::call_guard<py::gil_scoped_release>())
        .def(
            "_compressed_all_reduce",
            [](TaclBackend &b, at::Tensor tensor, const std::string &codec,
               double density, int bits, int64_t block, uint64_t seed,
               std::optional<at::Tensor> err, const std::string &scheme,
               const std::string &hops, bool async) {
                return b.compressed_all_reduce(
                    tensor, {codec, density, bits, block, seed}, err, scheme,
                    hops, async);
            },
            py::arg("tensor"), py::arg("codec"), py::arg("density"),
            py::arg("bits"), py::arg("block"), py::arg("seed"),
            py::arg("error_feedback"), py::arg("scheme"), py::arg("hops"),
            py::arg("async_op") = false,
            py::call_guard<py::gil_scoped_release>(),
            "tacl_comp_allreduce_hops in place on a float32 CPU tensor: "
            "its work (async_op: the _nb form, pending).")
        .def(
            "_compressed_reduce_scatter",
            [](TaclBackend &b, at::Tensor output, at::Tensor input,
               const std::string &codec, double density, int bits,
               int64_t block, uint64_t seed, std::optional<at::Tensor> err,
               const std::string &scheme, const std::string &hops,
               bool async) {
                return b.compressed_reduce_scatter(
                    output, input, {codec, density, bits, block, seed}, err,
                    scheme, hops, async);
            },
            py::arg("output"), py::arg("input"), py::arg("codec"),
            py::arg("density"), py::arg("bits"), py::arg("block"),
            py::arg("seed"), py::arg("error_feedback"), py::arg("scheme"),
            py::arg("hops") = "all", py::arg("async_op") = false,
            py::call_guard<py::gil_scoped_release>(),
            "tacl_comp_reduce_scatter_hops of float32 CPU tensors: its work "
            "(async_op: the _nb form, pending).")
        .def(
            "_compressed_scheme",
            [](TaclBackend &b, const std::string &codec, double density,
               int bits, int64_t block, size_t count, bool reduce_scatter,
               const std::string &scheme) {
                tacl_torch::CodecArgs c{codec, density, bits, block, 0};
                return tacl_torch::comp_scheme(b.comm(), c, count,
                                               reduce_scatter, scheme);
            },
            py::arg("codec"), py::arg("density"), py::arg("bits"),
            py::arg("block"), py::arg("count"), py::arg("reduce_scatter"),
            py::arg("scheme"), py::call_guard<py::gil_scoped_release>(),
            "The scheme a compressed call of count values runs (\"auto\": "
            "the lowest tacl_comp_estimate).")
        .def(
            "_all_gather_coalesced",
            [](TaclBackend &b, std::vector<at::Tensor> outs,
               std::vector<at::Tensor> ins, bool async) {
                return b.coalesced(outs, ins, nullptr,
                                   c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED,
                                   async);
            },
            py::arg("outputs"), py::arg("inputs"), py::arg("async_op") = true,
            py::call_guard<py::gil_scoped_release>())
        .def(
            "_reduce_scatter_coalesced",
            [](TaclBackend &b, std::vector<at::Tensor> outs,
               std::vector<at::Tensor> ins, const c10d::ReduceOp &op,
               bool async) {
                return b.coalesced(
                    outs, ins, &op,
                    c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, async);
            },
            py::arg("outputs"), py::arg("inputs"), py::arg("op"),
            py::arg("async_op") = true,
            py::call_guard<py::gil_scoped_release>())
        .def(py::init([](TaclBackend &parent, std::vector<int> ranks,
                         int tag, int rank, int size,
                         std::chrono::milliseconds timeout,
                         const std::string &name) {
                 return c10::make_intrusive<TaclBackend>(
                     parent, ranks, tag, rank, size, timeout, name);
             }),
             py::arg("parent"), py::arg("ranks"), py::arg("tag"),
             py::arg("rank"), py::arg("size"), py::arg("timeout"),
             py::arg("name"),
             "A communicator of some of parent's ranks, made by them only "
             "(tacl_comm_create_group).")
        .def("_set_store", &TaclBackend::set_store, py::arg("store"),
             "The store a split's or group's callback communicator is "
             "bootstrapped through.")
        .def("_has_callback_comm", &TaclBackend::has_callback_comm,
             "True once a collective inside a future's callback made the "
             "callback communicator.")
        .def("_from_split", &TaclBackend::from_split,
             "True when made by tacl_comm_split, not a new bootstrap.")
        .def("_made_by", &TaclBackend::made_by,
             "How the communicator was made: \"bootstrap\" (through the "
             "store), \"split\" (tacl_comm_split) or \"group\" "
             "(tacl_comm_create_group).")
        .def_static(
            "_as_callbacks",
            [](const py::function &f, const py::args &args) {
                tacl_torch::InCallbacks here;
                return f(*args);
            },
            "f(*args), this thread counting as running a future's "
            "callbacks meanwhile (tacl_torch wraps Future.then with it).")
        .def_static(
            "_stop_completer", [] { tacl_torch::Completer::get().stop(); },
            py::call_guard<py::gil_scoped_release>(),
            "Stop the completion thread (at interpreter exit).")
        .def_static(
            "_has_cuda",
            [] {
#ifdef TACL_TORCH_CUDA
                return true;
#else
                return false;
#endif
            },
            "True when built with CUDA: CUDA tensors are served too.")
        .def_static(
            "_bootstraps", [] { return tacl_torch::bootstraps.load(); },
            "How many communicators this process bootstrapped through a "
            "store (the others came from tacl_comm_split).")
        .def(
            "_counters",
            [](TaclBackend &b) {
                tacl_counters_t c;
                tacl_status_t s = tacl_comm_get_counters(b.comm(), &c);
                if (s != TACL_OK)
                    tacl_torch::fail("tacl_comm_get_counters", b.comm(), s);
                return tacl_torch::counters_dict(c);
            },
            "tacl_comm_get_counters as a dict (see tacl_torch.counters).")
        .def(
            "_reset_counters",
            [](TaclBackend &b) {
                tacl_status_t s = tacl_comm_reset_counters(b.comm());
                if (s != TACL_OK)
                    tacl_torch::fail("tacl_comm_reset_counters", b.comm(), s);
            },
            "tacl_comm_reset_counters.");

    py::class_<Snapshot>(m, "_Snapshot",
                         "A tacl snapshot set (tacl_snapshot_*) on a "
                         "backend's communicator; see PeerCheckpointer.")
        .def(py::init<const TaclBackend &, const std::string &, int,
                      const std::string &, const std::string &>(),
             py::arg("backend"), py::arg("key"), py::arg("replicas"),
             py::arg("placement"), py::arg("domain"))
        .def("add", &Snapshot::add, py::arg("name"), py::arg("tensor"))
        .def("replicated", &Snapshot::replicated, py::arg("group"))
        .def("save", &Snapshot::save, py::arg("version"))
        .def("done", &Snapshot::done)
        .def("wait", &Snapshot::wait)
        .def("latest", &Snapshot::latest)
        .def("restore", &Snapshot::restore)
        .def("close", &Snapshot::close, py::arg("purge") = false);
}
