/* forecast.h - `ringside predict`: every back end's communication and step time per step at N ranks past this machine, from links measured here */
#ifndef RS_FORECAST_H
#define RS_FORECAST_H

#define FORECAST_SCHEMA "ringside.predict/1"
#define FORECAST_MAX_RANKS 1000000

/* `ringside predict` with the arguments after "predict": prints the forecast and writes it as
 * JSON (--report) and CSV (--csv). Returns 0, or RS_ERR_INPUT (2) for a bad argument, no link, a
 * fit without the transport asked for, ranks outside 2..FORECAST_MAX_RANKS, a model file that is
 * not a train report (nothing written). */
int forecast_main(int argc, char **argv);

#endif
