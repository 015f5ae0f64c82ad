/**
 * One animation frame per burst of changes: a live view subscribes its `schedule`
 * to a document's listeners; however many messages arrive between two frames,
 * `draw` runs once, in the next frame. After `dispose` it never runs again.
 *
 * Self-contained (no imports) so that tests can run it outside a browser with
 * their own frame clock.
 */

/** Where frames come from: the browser's requestAnimationFrame, or a test's clock. */
export interface FrameClock {
  request(callback: () => void): number;
  cancel(handle: number): void;
}

const animationFrames: FrameClock = {
  request: callback => requestAnimationFrame(callback),
  cancel: handle => cancelAnimationFrame(handle)
};

export class FrameScheduler {
  private pending = 0;
  private disposed = false;
  private readonly draw: () => void;
  private readonly listeners: Set<() => void>;
  private readonly clock: FrameClock;

  /** Subscribes to `listeners` and asks for a first frame. */
  constructor(draw: () => void, listeners: Set<() => void>, clock: FrameClock = animationFrames) {
    this.draw = draw;
    this.listeners = listeners;
    this.clock = clock;
    listeners.add(this.schedule);
    this.schedule();
  }

  /** Asks for a frame, unless one is already asked for (or the scheduler is disposed). */
  readonly schedule = (): void => {
    if (!this.pending && !this.disposed) {
      this.pending = this.clock.request(() => {
        this.pending = 0;
        if (!this.disposed) {
          this.draw();
        }
      });
    }
  };

  /** Unsubscribes and cancels the frame asked for: `draw` is not called again. */
  dispose(): void {
    this.disposed = true;
    this.listeners.delete(this.schedule);
    if (this.pending) {
      this.clock.cancel(this.pending);
      this.pending = 0;
    }
  }
}
