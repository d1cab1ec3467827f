/**
 * Waiting for Ctrl-C. Once a server has been asked to stop, later SIGINTs are swallowed so a second
 * keypress (or a supervisor repeating the signal) cannot kill the process with Node's default
 * handler halfway through a clean shutdown.
 */
export function untilInterrupted(): Promise<void> {
  return new Promise((resolve) => {
    let seen = false;
    process.on('SIGINT', () => {
      if (!seen) resolve();
      seen = true;
    });
  });
}
